// QuantStats: per (table, type) running max, RMS and relative L2 error
// against a reference,
// merged correctly from several threads at once, and inert when disabled.
#include "kernels/quant_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

namespace ps::kernels {
namespace {

TEST(QuantStatsTest, MatchesReferenceAcrossThreads) {
  QuantStats stats(true);
  constexpr int kThreads = 4, kBatches = 200, kBatch = 64;
  // Thread t records errors t*1e-3 .. for table t % 2, type fp16.
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> orig(kBatch), deq(kBatch);
      for (int b = 0; b < kBatches; ++b) {
        for (int i = 0; i < kBatch; ++i) {
          orig[i] = static_cast<float>(i);
          deq[i] = orig[i] + ((i % 2) ? 0.25f : -0.25f) * (t + 1);
        }
        stats.Record(t % 2, ValueType::kFp16, orig, deq);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (uint32_t table : {0u, 1u}) {
    QuantErrorStats s = stats.Get(table, ValueType::kFp16);
    EXPECT_EQ(s.values, 2u * kBatches * kBatch);
    // Threads table, table + 2: errors 0.25*(t+1).
    double e1 = 0.25 * (table + 1), e2 = 0.25 * (table + 3);
    EXPECT_DOUBLE_EQ(s.max_abs_error, e2);
    EXPECT_NEAR(s.rms_error(), std::sqrt((e1 * e1 + e2 * e2) / 2), 1e-12);
  }
  EXPECT_EQ(stats.Get(0, ValueType::kInt8).values, 0u);
  auto snap = stats.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].table, 0u);
  EXPECT_EQ(snap[1].table, 1u);
  stats.Reset();
  EXPECT_TRUE(stats.Snapshot().empty());
}

TEST(QuantStatsTest, DisabledRecordsNothingAndNonFiniteIsNotAveraged) {
  QuantStats off(false);
  std::vector<float> a = {1, 2}, b = {1.5f, INFINITY};
  off.Record(1, ValueType::kInt8, a, b);
  EXPECT_TRUE(off.Snapshot().empty());
  QuantStats on(true);
  on.Record(1, ValueType::kInt8, a, b);
  QuantErrorStats s = on.Get(1, ValueType::kInt8);
  EXPECT_EQ(s.values, 2u);
  EXPECT_DOUBLE_EQ(s.max_abs_error, 0.5);
}

TEST(QuantStatsTest, RelativeL2Error) {
  QuantStats stats(true);
  const std::vector<float> original = {3, 4}, sent = {3, 4.5f};
  stats.Record(1, ValueType::kInt8, original, sent);
  const QuantErrorStats s = stats.Get(1, ValueType::kInt8);
  EXPECT_DOUBLE_EQ(s.relative_l2_error(), 0.5 / 5);
  EXPECT_DOUBLE_EQ(QuantErrorStats{}.relative_l2_error(), 0.0);
}

}  // namespace
}  // namespace ps::kernels
