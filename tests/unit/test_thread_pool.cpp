// The host thread pool: covers every index exactly once, runs nested calls inline, rethrows.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"

namespace strata {
namespace {

TEST(ThreadPool, EveryIndexExactlyOnceForAnyThreadCountAndGrain) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 7, 64, 1001}) {
      for (int64_t grain : {0, 1, 3, 2000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e) {
              ASSERT_LE(0, b);
              ASSERT_LT(b, e);
              ASSERT_LE(e, n);
              for (int64_t i = b; i < e; ++i)
                hits[static_cast<size_t>(i)].fetch_add(1);
            },
            grain);
        int64_t once = 0;
        for (auto& h : hits)
          once += h.load() == 1;
        EXPECT_EQ(once, n) << "threads " << threads << " n " << n << " grain " << grain;
      }
    }
  }
}

TEST(ThreadPool, NestedCallsRunInlineWithoutDeadlock) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(
      10,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          pool.parallel_for(
              10,
              [&](int64_t b2, int64_t e2) {
                for (int64_t j = b2; j < e2; ++j)
                  sum.fetch_add(i * 10 + j);
              },
              1);
      },
      1);
  EXPECT_EQ(sum.load(), 99 * 100 / 2);
}

TEST(ThreadPool, RethrowsTheFirstErrorAndStaysUsable) {
  ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(
                   100,
                   [&](int64_t b, int64_t) {
                     if (b >= 50) fail("index {} is bad", b);
                   },
                   1),
               Error);
  std::atomic<int64_t> count{0};
  pool.parallel_for(
      100, [&](int64_t b, int64_t e) { count.fetch_add(e - b); }, 1);
  EXPECT_EQ(count.load(), 100);
}

TEST(ThreadPool, RejectsZeroThreads) {
  EXPECT_THROW(ThreadPool(0), Error);
}

}  // namespace
}  // namespace strata
