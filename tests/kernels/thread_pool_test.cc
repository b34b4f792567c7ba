#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace ps::kernels {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (size_t n : {0u, 1u, 3u, 7u, 1000u, 100003u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 1, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
  }
}

TEST(ThreadPoolTest, RespectsMinChunkAndRunsInlineWithoutPool) {
  ThreadPool pool(4);
  std::atomic<int> chunks{0};
  pool.ParallelFor(10, 100, [&](size_t b, size_t e, int) {
    EXPECT_EQ(b, 0u);
    EXPECT_EQ(e, 10u);
    chunks++;
  });
  EXPECT_EQ(chunks.load(), 1);
  long sum = 0;
  ParallelFor(nullptr, 5, 1, [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) sum += static_cast<long>(i);
  });
  EXPECT_EQ(sum, 10);
}

TEST(ThreadPoolTest, ManyRoundsInARow) {
  ThreadPool pool(3);
  std::atomic<long> total{0};
  for (int round = 0; round < 2000; ++round) {
    pool.ParallelFor(64, 1, [&](size_t b, size_t e, int) {
      total.fetch_add(static_cast<long>(e - b));
    });
  }
  EXPECT_EQ(total.load(), 2000L * 64);
}

}  // namespace
}  // namespace ps::kernels
