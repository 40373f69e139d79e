// A small fixed pool of worker threads for the host reference kernels (2-core CI machines run
// the model through them, so rows / heads / experts are spread over the cores).
//
// parallel_for(n, fn) calls fn(begin, end) on disjoint sub-ranges that together cover [0, n);
// the calling thread works too. The partition depends on the thread count, so a kernel must
// make each index's result self-contained (one thread computes an output element, in a fixed
// order): then results are bit-identical for any number of threads.
//
// A parallel_for issued from inside another one (nested), or while a different thread is
// using the pool, runs inline on the calling thread: correct, never deadlocks, just serial.
// The first exception thrown by fn is rethrown on the caller after every thread has stopped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace strata {

class ThreadPool {
 public:
  // `threads` counts the caller: ThreadPool(1) starts no workers and runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const;
  // `grain` = indices per claimed chunk; 0 picks about four chunks per thread.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn,
                    int64_t grain = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// STRATA_HOST_THREADS when set (>= 1), else std::thread::hardware_concurrency().
int default_host_threads();
// The process-wide pool the host kernels use (created on first use).
ThreadPool& host_pool();
// Replaces the process-wide pool (tests compare thread counts; the engine sets it at start).
// Must not be called while host kernels run.
void set_host_threads(int threads);

inline void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                         int64_t grain = 0) {
  host_pool().parallel_for(n, fn, grain);
}

}  // namespace strata
