// The dense accumulator sums duplicates, counts the rows touched, and is
// all zeros again after ClearTouched.
#include "client/dense_accumulator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace ps::worker {
namespace {

TEST(DenseAccumulatorTest, SumsDuplicatesAndCountsTheRowsTouched) {
  for (uint32_t dim : {1u, 3u}) {
    DenseAccumulator acc;
    acc.Reset(1000, dim);
    std::mt19937 rng(dim);
    std::map<uint32_t, std::vector<float>> want;
    for (int i = 0; i < 5000; ++i) {
      const uint32_t row = rng() % 1000;
      std::vector<float> v(dim);
      for (uint32_t j = 0; j < dim; ++j) v[j] = static_cast<float>(rng() % 8);
      if (dim == 1) {
        acc.Add1(row, v[0]);
      } else {
        acc.Add(row, v.data());
      }
      auto& w = want[row];
      w.resize(dim);
      for (uint32_t j = 0; j < dim; ++j) w[j] += v[j];
    }
    EXPECT_EQ(acc.CountTouched(), want.size());
    for (const auto& [row, v] : want) {
      for (uint32_t j = 0; j < dim; ++j) {
        ASSERT_EQ(acc.dense()[size_t{row} * dim + j], v[j]) << "row " << row;
      }
    }
    acc.ClearTouched();
    EXPECT_EQ(acc.CountTouched(), 0u);
    for (float x : acc.dense()) ASSERT_EQ(x, 0.0f);
  }
}

TEST(DenseAccumulatorTest, ClearTouchedZeroesOnlyWhatWasAdded) {
  DenseAccumulator acc;
  acc.Reset(130, 2);
  const float v[2] = {1.5f, -2.0f};
  acc.Add(0, v);
  acc.Add(129, v);
  EXPECT_EQ(acc.dense()[129 * 2 + 1], -2.0f);
  acc.ClearTouched();
  for (float x : acc.dense()) ASSERT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace ps::worker
