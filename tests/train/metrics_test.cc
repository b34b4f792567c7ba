// AUC, logloss and normalized entropy: the usual values, and total on any
// input: NaN and infinite scores return NaN at once (they used to spin forever
// in Auc's tie loop, after a std::sort that NaN made undefined).
#include "worker/eval/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/train/watchdog.h"

namespace ps::eval {
namespace {

using ps::testing::Watchdog;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(MetricsTest, AucRanksAndSharesTies) {
  const std::vector<float> labels = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(Auc(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}, labels), 1);
  EXPECT_DOUBLE_EQ(Auc(std::vector<float>{0.4f, 0.3f, 0.2f, 0.1f}, labels), 0);
  // Every pair tied: half credit each.
  EXPECT_DOUBLE_EQ(Auc(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}, labels),
                   0.5);
  // One class only, or nothing: 0.5.
  EXPECT_DOUBLE_EQ(
      Auc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(Auc({}, {}), 0.5);
}

TEST(MetricsTest, NormalizedEntropyIsLoglossOverTheBaseRateEntropy) {
  // H(1/2) = ln 2; H(1/4) = -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.562335...
  EXPECT_NEAR(BaseRateEntropy(0.5), std::log(2.0), 1e-12);
  EXPECT_NEAR(BaseRateEntropy(0.25), 0.5623351446188083, 1e-12);
  EXPECT_DOUBLE_EQ(BaseRateEntropy(0.25), BaseRateEntropy(0.75));
  // Predicting the base rate itself scores NE exactly 1.
  const std::vector<float> labels = {1, 0, 0, 0};
  const std::vector<float> constant(4, 0.25f);
  MetricAccumulator acc;
  for (size_t i = 0; i < labels.size(); ++i) acc.Add(constant[i], labels[i]);
  EXPECT_DOUBLE_EQ(acc.positive_rate(), 0.25);
  EXPECT_NEAR(acc.normalized_entropy(), 1.0, 1e-6);
  // A better model is below 1, a worse one above: 0.5 everywhere costs ln 2.
  EXPECT_NEAR(NormalizedEntropy(std::log(2.0), 0.25),
              std::log(2.0) / 0.5623351446188083, 1e-12);
  EXPECT_NEAR(NormalizedEntropy(0.1, 0.5), 0.1 / std::log(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(PositiveRate(std::vector<float>{1, 1, 0, 0.2f, kNaN}), 0.4);
  EXPECT_DOUBLE_EQ(PositiveRate({}), 0);
}

TEST(MetricsTest, NormalizedEntropyIsUndefinedForOneClassNotADivisionByZero) {
  EXPECT_DOUBLE_EQ(BaseRateEntropy(0), 0);
  EXPECT_DOUBLE_EQ(BaseRateEntropy(1), 0);
  EXPECT_TRUE(std::isnan(NormalizedEntropy(0.3, 0)));
  EXPECT_TRUE(std::isnan(NormalizedEntropy(0.3, 1)));
  EXPECT_TRUE(std::isnan(NormalizedEntropy(0, 1)));
  EXPECT_TRUE(std::isnan(NormalizedEntropy(kNaN, 0.5)));
  EXPECT_TRUE(std::isnan(NormalizedEntropy(0.3, kNaN)));
  MetricAccumulator all_clicks;
  all_clicks.Add(0.9f, 1);
  all_clicks.Add(0.8f, 1);
  EXPECT_DOUBLE_EQ(all_clicks.positive_rate(), 1);
  EXPECT_TRUE(std::isnan(all_clicks.normalized_entropy()));
}

TEST(MetricsTest, NonFiniteScoresMakeNaNAndNeverHang) {
  Watchdog watchdog("Auc/LogLoss on NaN and inf", std::chrono::seconds(10));
  // Enough values that std::sort leaves insertion sort: with NaN its
  // unguarded loops could run off the array.
  std::vector<float> scores(1000), labels(1000);
  for (size_t i = 0; i < scores.size(); ++i) {
    scores[i] = static_cast<float>(i % 17) / 17;
    labels[i] = i % 3 == 0 ? 1.0f : 0.0f;
  }
  for (float bad : {kNaN, kInf, -kInf}) {
    for (size_t at : {size_t{0}, size_t{500}, size_t{999}}) {
      std::vector<float> s = scores;
      s[at] = bad;
      EXPECT_TRUE(std::isnan(Auc(s, labels))) << bad << " at " << at;
      EXPECT_TRUE(std::isnan(LogLoss(s, labels))) << bad << " at " << at;
      EXPECT_EQ(FirstNonFinite(s), at);
    }
  }
  std::vector<float> all_nan(1000, kNaN);
  EXPECT_TRUE(std::isnan(Auc(all_nan, labels)));
  EXPECT_TRUE(std::isnan(LogLoss(all_nan, labels)));
  MetricAccumulator acc;
  acc.Add(0.5f, 1);
  acc.Add(kNaN, 0);
  EXPECT_EQ(acc.non_finite(), 1u);
  EXPECT_TRUE(std::isnan(acc.auc()));
  // A NaN label is a non-click, not a reason to fail.
  EXPECT_DOUBLE_EQ(
      Auc(std::vector<float>{0.2f, 0.8f}, std::vector<float>{kNaN, 1}), 1);
}

TEST(MetricsTest, LogLossClipsFiniteProbabilities) {
  const std::vector<float> labels = {1, 0};
  EXPECT_NEAR(LogLoss(std::vector<float>{0.5f, 0.5f}, labels), std::log(2.0),
              1e-12);
  // 0 and 1 (and beyond) are clipped to [1e-7, 1 - 1e-7]: finite.
  const double clipped = LogLoss(std::vector<float>{0.0f, 2.0f}, labels);
  EXPECT_TRUE(std::isfinite(clipped));
  EXPECT_NEAR(clipped, -std::log(1e-7), 1e-6);
  EXPECT_EQ(LogLoss({}, {}), 0.0);
}

}  // namespace
}  // namespace ps::eval
