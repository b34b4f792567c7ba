// AdmissionSketch: exact counts while keys rarely share counters, never an
// underestimate, fixed memory under a stream of distinct keys, Forget takes
// one key out and leaves the others, aging halves, and the distinct-key
// estimate.
#include "table/admission_sketch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

#include "table/row_index.h"

namespace ps::table {
namespace {

uint64_t H(uint64_t key) { return RowIndex::Mix(key); }

TEST(AdmissionSketchTest, CountsAFewKeysExactly) {
  AdmissionSketch s(1 << 12);
  for (uint32_t n = 1; n <= 5; ++n) EXPECT_EQ(s.Add(H(7)), n);
  EXPECT_EQ(s.Add(H(8)), 1u);
  EXPECT_EQ(s.Estimate(H(7)), 5u);
  EXPECT_EQ(s.Estimate(H(9)), 0u);
  EXPECT_EQ(s.EstimatedKeys(), 2u);
}

TEST(AdmissionSketchTest, NeverUnderestimatesAndMemoryStaysFixed) {
  AdmissionSketch s(1 << 14);
  const uint64_t bytes = s.bytes();
  EXPECT_EQ(bytes, AdmissionSketch::kDepth * (1u << 14) * sizeof(uint16_t));
  std::mt19937_64 rng(3);
  std::unordered_map<uint64_t, uint32_t> truth;
  // Fewer than 8 x width adds: no aging in between.
  for (int i = 0; i < 100000; ++i) {
    const uint64_t key = rng() % 20000;
    ++truth[key];
    s.Add(H(key));
  }
  uint64_t exact = 0;
  for (const auto& [key, count] : truth) {
    const uint32_t e = s.Estimate(H(key));
    EXPECT_GE(e, count) << key;
    exact += e == count;
  }
  // Width 16384, 20000 keys: most still count exactly.
  EXPECT_GT(exact, truth.size() / 2);
  EXPECT_EQ(s.bytes(), bytes);
}

TEST(AdmissionSketchTest, ForgetTakesOneKeyOutAndLeavesTheOthers) {
  AdmissionSketch s(1 << 12);
  for (int i = 0; i < 3; ++i) s.Add(H(1));
  for (int i = 0; i < 2; ++i) s.Add(H(2));
  s.Forget(H(1));
  EXPECT_EQ(s.Estimate(H(1)), 0u);
  EXPECT_EQ(s.Estimate(H(2)), 2u);
  EXPECT_EQ(s.EstimatedKeys(), 1u);
  EXPECT_EQ(s.Add(H(1)), 1u);  // counts again from zero
}

TEST(AdmissionSketchTest, CountsHalveAfterEightTimesTheWidthOfAdds) {
  AdmissionSketch s(64);
  for (int i = 0; i < 10; ++i) s.Add(H(5));
  // 8 x 64 = 512 adds in all: the 512th halves every counter.
  for (uint64_t k = 1000; k < 1000 + 512 - 10; ++k) s.Add(H(k));
  EXPECT_LE(s.Estimate(H(5)), 5u + 8u);  // 10 halved, plus what it shares
  EXPECT_GE(s.Estimate(H(5)), 5u);
}

TEST(AdmissionSketchTest, WidthIsAPowerOfTwoOfAtLeast64) {
  EXPECT_EQ(AdmissionSketch(0).width(), 64u);
  EXPECT_EQ(AdmissionSketch(1000).width(), 1024u);
}

}  // namespace
}  // namespace ps::table
