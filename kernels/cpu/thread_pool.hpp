// A small persistent thread pool for the cpu backend (no OpenMP: oneDNN and OpenBLAS bring their own
// threading and environment variables, and detaudit's kernels must not share them).
// run(fn) calls fn(t) for t = 0..size()-1, t = 0 on the calling thread, and returns when all are done.
// A part t whose worker has not picked it up by the time the caller finishes its own part runs on the
// caller instead (a late or descheduled worker then costs no waiting).
// determinism: the pool only says who runs what; which work a part index gets is decided by the
// caller, so static partitions give the same bits whatever the OS scheduling and whichever thread
// runs a part.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <immintrin.h>

namespace detaudit {

// Takes a lock that is held for a few vector adds (the atomic order's partial sums): spin briefly, then
// yield, so that a holder descheduled by a busy machine does not cost the waiter its time slice.
// Release with lock.clear(std::memory_order_release).
inline void spin_acquire(std::atomic_flag& lock) {
  for (int spins = 0; lock.test_and_set(std::memory_order_acquire); ++spins) {
    if (spins < 64)
      _mm_pause();
    else
      std::this_thread::yield();
  }
}

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }
  // Runs fn(0..size()-1) in parallel; not reentrant (one run at a time, never from inside fn).
  void run(const std::function<void(int)>& fn);
  // Runs fn(0..n-1) on the first min(n, size()) threads.
  void run_n(int n, const std::function<void(int)>& fn);

 private:
  void worker(int tid);

  // A part's state for run `gen`: gen << 2 | {0 open, 1 taken, 2 done}.
  struct alignas(64) Slot {
    std::atomic<uint64_t> state{0};
  };

  int size_ = 1;
  std::vector<std::thread> workers_;
  std::unique_ptr<Slot[]> slots_;
  const std::function<void(int)>* fn_ = nullptr;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace detaudit
