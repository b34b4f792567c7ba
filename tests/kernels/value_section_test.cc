// LargestMagnitude: the largest |x| of a push's gradients, and a non-finite
// result for any NaN or infinity among them, wherever it lies (the loop is
// vectorized: every lane and the tail after the last whole vector).
#include "kernels/value_section.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace ps::kernels {
namespace {

TEST(LargestMagnitudeTest, IsTheLargestAbsoluteValue) {
  EXPECT_EQ(LargestMagnitude(nullptr, 0), 0.0f);
  const std::vector<float> zeros = {-0.0f, 0.0f, -0.0f};
  EXPECT_EQ(LargestMagnitude(zeros.data(), zeros.size()), 0.0f);
  EXPECT_FALSE(std::signbit(LargestMagnitude(zeros.data(), zeros.size())));
  const float kMax = std::numeric_limits<float>::max();
  const float kTiny = std::numeric_limits<float>::denorm_min();
  for (size_t n = 1; n <= 70; ++n) {
    for (size_t at = 0; at < n; ++at) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = (i % 2 ? -1.0f : 1.0f) * 0.5f;
      v[at] = -3.25f;
      EXPECT_EQ(LargestMagnitude(v.data(), n), 3.25f) << n << " " << at;
      v[at] = kMax;
      EXPECT_EQ(LargestMagnitude(v.data(), n), kMax);
    }
  }
  const std::vector<float> tiny = {kTiny, -2 * kTiny, 0.0f};
  EXPECT_EQ(LargestMagnitude(tiny.data(), tiny.size()), 2 * kTiny);
}

TEST(LargestMagnitudeTest, IsNotFiniteWhenAnyValueIsNot) {
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (size_t n = 1; n <= 70; ++n) {
    for (size_t at = 0; at < n; ++at) {
      std::vector<float> v(n, 1.0f);
      v[at] = -kInf;
      EXPECT_EQ(LargestMagnitude(v.data(), n), kInf) << n << " " << at;
      v[at] = kNaN;
      EXPECT_TRUE(std::isnan(LargestMagnitude(v.data(), n))) << n << " " << at;
      v[at] = -kNaN;
      if (at > 0) v[0] = kInf;  // a NaN wins over an infinity
      EXPECT_TRUE(std::isnan(LargestMagnitude(v.data(), n))) << n << " " << at;
    }
  }
}

}  // namespace
}  // namespace ps::kernels
