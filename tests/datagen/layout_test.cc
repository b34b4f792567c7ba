// --layout's names, and the bias calibration every non-Criteo layout uses.
#include "worker/datagen/layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "worker/datagen/bias_calibration.h"

namespace ps::datagen {
namespace {

TEST(LayoutTest, ParsesTheThreeLayouts) {
  EXPECT_EQ(*ParseLayout("criteo"), Layout::kCriteo);
  EXPECT_EQ(*ParseLayout("onehot"), Layout::kOnehot);
  EXPECT_EQ(*ParseLayout("avazu"), Layout::kAvazu);
  StatusOr<Layout> bad = ParseLayout("foo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(
                "--layout must be criteo, onehot or avazu, not 'foo'"),
            std::string::npos);
}

double MeanAt(const std::vector<double>& p, double b) {
  double sum = 0;
  for (double pi : p) {
    double logit = std::log(pi / (1 - pi));
    sum += 1 / (1 + std::exp(-(b + logit)));
  }
  return sum / p.size();
}

TEST(LayoutTest, CalibratedBiasGivesTheRate) {
  std::vector<double> p = {0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.05};
  for (double rate : {0.17, 1.0 / 3, 0.5, 0.8}) {
    double b = CalibrateBias(p, rate, -30, 30);
    EXPECT_NEAR(MeanAt(p, b), rate, 1e-9) << rate;
  }
  // No features: the logit of the rate; out of reach: the bound.
  EXPECT_NEAR(CalibrateBias({}, 0.25, -30, 30), std::log(1.0 / 3), 1e-12);
  EXPECT_NEAR(CalibrateBias(p, 0.999999, -1, 1), 1, 1e-12);
}

}  // namespace
}  // namespace ps::datagen
