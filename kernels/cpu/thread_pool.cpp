#include "kernels/cpu/thread_pool.hpp"

#include <immintrin.h>

namespace detaudit {

namespace {
// Spin briefly before sleeping: a gemm per conv image wakes the pool often, and a condition variable
// round trip costs tens of microseconds.
constexpr int kSpinIterations = 1 << 12;
}  // namespace

ThreadPool::ThreadPool(int threads) : size_(threads < 1 ? 1 : threads) {
  workers_.reserve(size_ - 1);
  for (int t = 1; t < size_; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker(int tid) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpinIterations; ++i) {
      _mm_pause();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_) return;
    if (tid < active_) (*fn_)(tid);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) { run_n(size_, fn); }

void ThreadPool::run_n(int n, const std::function<void(int)>& fn) {
  if (n <= 1 || size_ == 1) {
    for (int t = 0; t < n; ++t) fn(t);  // n <= 1, or a pool of one: run inline
    return;
  }
  int active = n < size_ ? n : size_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    active_ = active;
    pending_.store(size_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  fn(0);
  while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
  // When n > size_ the caller asked for more work items than threads: run the rest inline.
  for (int t = size_; t < n; ++t) fn(t);
}

}  // namespace detaudit
