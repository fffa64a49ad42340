#include "kernels/cpu/thread_pool.hpp"

#include <immintrin.h>

namespace detaudit {

namespace {
// Spin briefly before sleeping: a training step wakes the pool often, and a condition variable
// round trip costs tens of microseconds.
constexpr int kSpinIterations = 1 << 12;
// The caller, waiting for a worker that took a part, yields the core after this many pauses (the
// machine may have fewer free cores than threads).
constexpr int kWaitSpins = 1 << 8;
}  // namespace

ThreadPool::ThreadPool(int threads) : size_(threads < 1 ? 1 : threads), slots_(new Slot[size_ < 1 ? 1 : size_]) {
  workers_.reserve(size_ - 1);
  for (int t = 1; t < size_; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
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
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    // Take part `tid` of run g unless the caller already did (or the run has no such part). Success
    // means run g is still in progress, so fn_ belongs to it.
    uint64_t open = g << 2;
    if (slots_[tid].state.compare_exchange_strong(open, open | 1, std::memory_order_acq_rel)) {
      (*fn_)(tid);
      slots_[tid].state.store(open | 2, std::memory_order_release);
    }
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) { run_n(size_, fn); }

void ThreadPool::run_n(int n, const std::function<void(int)>& fn) {
  if (n <= 1 || size_ == 1) {
    for (int t = 0; t < n; ++t) fn(t);  // n <= 1, or a pool of one: run inline
    return;
  }
  const int active = n < size_ ? n : size_;
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  fn_ = &fn;
  for (int t = 1; t < active; ++t) slots_[t].state.store(gen << 2, std::memory_order_relaxed);
  generation_.store(gen);  // seq_cst: pairs with sleepers_ below (a sleeper sees gen or gets notified)
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    wake_.notify_all();
  }
  fn(0);
  for (int t = 1; t < active; ++t) {
    uint64_t open = gen << 2;
    if (slots_[t].state.compare_exchange_strong(open, open | 1, std::memory_order_acq_rel)) {
      fn(t);  // its worker has not started it: run it here
      continue;
    }
    for (int i = 0; slots_[t].state.load(std::memory_order_acquire) != ((gen << 2) | 2); ++i) {
      if (i < kWaitSpins)
        _mm_pause();
      else
        std::this_thread::yield();
    }
  }
  // When n > size_ the caller asked for more work items than threads: run the rest inline.
  for (int t = size_; t < n; ++t) fn(t);
}

}  // namespace detaudit
