// A small persistent thread pool for the cpu backend (no OpenMP: oneDNN and OpenBLAS bring their own
// threading and environment variables, and detaudit's kernels must not share them).
// run(fn) calls fn(t) for t = 0..size()-1, t = 0 on the calling thread, and returns when all are done.
// determinism: the pool only says who runs what; which work a thread index gets is decided by the
// caller, so static partitions give the same bits whatever the OS scheduling.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace detaudit {

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

  int size_ = 1;
  int active_ = 1;  // threads taking part in the current run
  std::vector<std::thread> workers_;
  const std::function<void(int)>* fn_ = nullptr;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

}  // namespace detaudit
