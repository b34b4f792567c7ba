// CriteoKeys: the fields total about the ids asked for, each example has
// one id per field inside that field's range, fields go missing at the
// layout's share, and the categorical fields keep their skew.
#include "bench/criteo_keys.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "worker/datagen/criteo_synth.h"

namespace ps::bench {
namespace {

TEST(CriteoKeysTest, FieldsTotalTheIdsAskedForAndEachKeyIsItsFields) {
  constexpr uint64_t kIds = 2000000;
  CriteoKeys keys(kIds);
  EXPECT_NEAR(static_cast<double>(keys.ids()), kIds, kIds * 0.001);
  EXPECT_GT(keys.vocab_scale(), 0.0);
  EXPECT_LT(keys.vocab_scale(), 1.0);
  std::mt19937_64 rng(3);
  constexpr int kExamples = 20000;
  std::vector<uint64_t> example(CriteoKeys::kFields);
  // Per field: the smallest and largest id, and how often each id came.
  std::vector<uint64_t> lo(CriteoKeys::kFields, UINT64_MAX);
  std::vector<uint64_t> hi(CriteoKeys::kFields, 0);
  std::vector<std::map<uint64_t, int>> seen(CriteoKeys::kFields);
  for (int e = 0; e < kExamples; ++e) {
    keys.Example(rng, example);
    for (int f = 0; f < CriteoKeys::kFields; ++f) {
      ASSERT_GE(example[f], 1u);
      ASSERT_LE(example[f], keys.ids());
      lo[f] = std::min(lo[f], example[f]);
      hi[f] = std::max(hi[f], example[f]);
      ++seen[f][example[f]];
    }
  }
  for (int f = 0; f + 1 < CriteoKeys::kFields; ++f) {
    EXPECT_LT(hi[f], lo[f + 1]) << "fields " << f << " and " << f + 1;
  }
  for (int f = 0; f < CriteoKeys::kFields; ++f) {
    // The field's most common id is its "missing" one where a third of the
    // cells are missing, else a frequent value.
    int most = 0;
    for (const auto& [id, n] : seen[f]) most = std::max(most, n);
    const double missing = datagen::CriteoMissingShare(f);
    if (missing > 0.3) {
      EXPECT_NEAR(static_cast<double>(seen[f][hi[f]]) / kExamples, missing,
                  0.02)
          << "field " << f;
    }
    EXPECT_GT(most, kExamples / 100) << "field " << f << " has no head";
  }
  // The largest field (the Kaggle log's C3, 10.1M values at scale 1) has a
  // long tail: most of its ids in 20k examples come once.
  size_t largest = 0, once = 0;
  for (int f = 13; f < CriteoKeys::kFields; ++f) {
    if (seen[f].size() > seen[largest].size()) largest = f;
  }
  for (const auto& [id, n] : seen[largest]) once += n == 1;
  EXPECT_GT(once, seen[largest].size() / 2);
}

TEST(CriteoKeysTest, TheSameSeedDrawsTheSameExamples) {
  CriteoKeys a(100000), b(100000);
  std::mt19937_64 ra(5), rb(5);
  std::vector<uint64_t> x(CriteoKeys::kFields), y(CriteoKeys::kFields);
  for (int e = 0; e < 100; ++e) {
    a.Example(ra, x);
    b.Example(rb, y);
    ASSERT_EQ(x, y);
  }
}

}  // namespace
}  // namespace ps::bench
