#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"

namespace strata {

namespace {
// True on pool workers and on a caller while it runs a job: nested calls then run inline.
thread_local bool t_inside_pool = false;

void run_inline(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  for (int64_t b = 0; b < n; b += grain)
    fn(b, std::min(n, b + grain));
}
}  // namespace

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex submit_mu;  // one job at a time; a second submitter runs inline

  std::mutex mu;
  std::condition_variable cv_work, cv_done;
  uint64_t generation = 0;  // bumped per job; workers wake when it changes
  int busy = 0;             // workers that have not finished the current job
  bool stop = false;

  // The current job (written under mu before generation is bumped).
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, grain = 1;
  std::atomic<int64_t> next{0};
  std::mutex error_mu;
  std::exception_ptr error;

  void run_chunks() {
    for (;;) {
      const int64_t b = next.fetch_add(grain);
      if (b >= n) return;
      try {
        (*fn)(b, std::min(n, b + grain));
      } catch (...) {
        {
          std::lock_guard<std::mutex> lk(error_mu);
          if (!error) error = std::current_exception();
        }
        next.store(n);  // stop handing out chunks
        return;
      }
    }
  }

  void worker_loop() {
    t_inside_pool = true;
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu);
        cv_work.wait(lk, [&] { return stop || generation != seen; });
        if (stop) return;
        seen = generation;
      }
      run_chunks();
      {
        std::lock_guard<std::mutex> lk(mu);
        if (--busy == 0) cv_done.notify_all();
      }
    }
  }
};

ThreadPool::ThreadPool(int threads) : impl_(std::make_unique<Impl>()) {
  if (threads < 1) fail("thread pool: thread count must be >= 1, got {}", threads);
  for (int i = 1; i < threads; ++i)
    impl_->workers.emplace_back([this] { impl_->worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv_work.notify_all();
  for (auto& w : impl_->workers)
    w.join();
}

int ThreadPool::threads() const {
  return static_cast<int>(impl_->workers.size()) + 1;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  if (grain <= 0) grain = std::max<int64_t>(1, n / (4 * threads()));
  Impl& p = *impl_;
  if (p.workers.empty() || n <= grain || t_inside_pool) {
    run_inline(n, grain, fn);
    return;
  }
  std::unique_lock<std::mutex> submit(p.submit_mu, std::try_to_lock);
  if (!submit.owns_lock()) {
    run_inline(n, grain, fn);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(p.mu);
    p.fn = &fn;
    p.n = n;
    p.grain = grain;
    p.next.store(0);
    p.error = nullptr;
    p.busy = static_cast<int>(p.workers.size());
    ++p.generation;
  }
  p.cv_work.notify_all();
  t_inside_pool = true;
  p.run_chunks();
  t_inside_pool = false;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lk(p.mu);
    p.cv_done.wait(lk, [&] { return p.busy == 0; });
    p.fn = nullptr;
    error = p.error;
    p.error = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

int default_host_threads() {
  if (const char* env = std::getenv("STRATA_HOST_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || v < 1 || v > 1024)
      fail("STRATA_HOST_THREADS must be an integer in [1, 1024], got '{}'", env);
    return static_cast<int>(v);
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(std::min(hc, 64u));
}

namespace {
std::mutex g_pool_mu;
std::unique_ptr<ThreadPool> g_pool;
}  // namespace

ThreadPool& host_pool() {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(default_host_threads());
  return *g_pool;
}

void set_host_threads(int threads) {
  auto fresh = std::make_unique<ThreadPool>(threads);
  std::lock_guard<std::mutex> lk(g_pool_mu);
  g_pool = std::move(fresh);
}

}  // namespace strata
