// FieldSignal: the random-effects estimate of each field's signal and the
// admission thresholds it gives. A field whose values' click rates differ
// gets a small n*, one whose values all click alike none (the largest
// threshold); the threshold follows reliability / (1 - reliability) and the
// number of workers; the estimate holds when a field has more values than
// the sample keeps (the sampled values' counts stay exact).
#include "worker/train/field_signal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace ps::train {
namespace {

// `values` values of `field`, each seen `per_value` times, value v clicking
// with probability rate(v).
template <typename Rate>
data::ExampleBatch Examples(uint32_t field, uint32_t values, uint32_t per_value,
                            Rate rate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  data::ExampleBatch batch;
  for (uint32_t v = 0; v < values; ++v) {
    for (uint32_t k = 0; k < per_value; ++k) {
      batch.AddFeature(uint64_t{field} << 40 | v, 1.0f, field);
      batch.EndExample(u(rng) < rate(v) ? 1.0f : 0.0f);
    }
  }
  return batch;
}

TEST(FieldSignalTest, SignalGivesASmallPriorCountAndNoiseNone) {
  FieldSignal signal;
  // Field 0: half the values click at 0.1, half at 0.5: p = 0.3, the true
  // spread tau2 = 0.04, the noise within a value 0.21 - 0.04 = 0.17, so
  // n* = 0.17 / 0.04 = 4.25.
  signal.Add(Examples(
      0, 2000, 40, [](uint32_t v) { return v % 2 ? 0.5 : 0.1; }, 1));
  // Field 1: every value at 0.3.
  signal.Add(Examples(
      1, 2000, 40, [](uint32_t) { return 0.3; }, 2));
  const std::vector<FieldEstimate> e = signal.Estimates();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].occurrences, 80000u);
  EXPECT_EQ(e[0].sampled_values, 2000u);
  EXPECT_NEAR(e[0].click_rate, 0.3, 0.01);
  EXPECT_NEAR(e[0].signal_variance, 0.04, 0.004);
  EXPECT_NEAR(e[0].prior_count, 4.25, 0.6);
  // Noise only: the estimate is about 0 (either sign); n* is infinite or
  // far above field 0's.
  EXPECT_NEAR(e[1].signal_variance, 0.0, 0.002);
  EXPECT_TRUE(!std::isfinite(e[1].prior_count) || e[1].prior_count > 100);

  const auto t = FieldSignal::Thresholds(e, 0.5, 1, 65535);
  EXPECT_EQ(t[0], static_cast<uint32_t>(std::ceil(e[0].prior_count)));
  // Reliability 0.8: four times n*; over 4 workers: a quarter of that.
  EXPECT_EQ(FieldSignal::Thresholds(e, 0.8, 1, 65535)[0],
            static_cast<uint32_t>(std::ceil(e[0].prior_count * 4)));
  EXPECT_EQ(FieldSignal::Thresholds(e, 0.8, 4, 65535)[0],
            static_cast<uint32_t>(std::ceil(e[0].prior_count)));
  // The largest threshold caps everything.
  EXPECT_EQ(FieldSignal::Thresholds(e, 0.5, 1, 3)[0], 3u);
}

TEST(FieldSignalTest, AFieldWithoutSignalGetsTheLargestThreshold) {
  FieldEstimate none;
  none.prior_count = std::numeric_limits<double>::infinity();
  FieldEstimate tiny;
  tiny.prior_count = 0.01;
  EXPECT_EQ(FieldSignal::Thresholds({none, tiny}, 0.5, 2, 999),
            (std::vector<uint32_t>{FieldSignal::kNever, 1}));
}

TEST(FieldSignalTest, AFrequentValueIsAdmittedWhateverTheSignal) {
  // A value that makes up 1% of its field's occurrences gets its own row
  // even in a field without marginal signal (its FM factors may carry
  // interactions that tau2 cannot see), and n* beyond that share is capped.
  FieldEstimate none;
  none.prior_count = std::numeric_limits<double>::infinity();
  none.occurrences = 10000;
  FieldEstimate weak;
  weak.prior_count = 5000;
  weak.occurrences = 30000;
  FieldEstimate strong;
  strong.prior_count = 2;
  strong.occurrences = 30000;
  // 2 workers: each counts half of the occurrences.
  EXPECT_EQ(FieldSignal::Thresholds({none, weak, strong}, 0.5, 2, 65535),
            (std::vector<uint32_t>{50, 150, 1}));
}

TEST(FieldSignalTest, ManyValuesAreSampledAndTheEstimateHolds) {
  FieldSignal signal;
  const uint32_t values = 4 * FieldSignal::kMaxValuesPerField;
  signal.Add(Examples(
      3, values, 4, [](uint32_t v) { return v % 2 ? 0.5 : 0.1; }, 3));
  const FieldEstimate e = signal.Estimates().at(3);
  EXPECT_EQ(e.occurrences, uint64_t{values} * 4);
  EXPECT_LE(e.sampled_values, FieldSignal::kMaxValuesPerField);
  EXPECT_LT(e.sample_fraction, 1.0);
  // The sample is a fraction of the values, each counted at every
  // occurrence: 4 each.
  EXPECT_NEAR(e.sampled_values, values * e.sample_fraction,
              values * e.sample_fraction * 0.05);
  EXPECT_NEAR(e.signal_variance, 0.04, 0.006);
  // The admitted values are scaled back up from the sample: all of them at
  // threshold 4, none at 5.
  EXPECT_NEAR(signal.AdmittedValues({0, 0, 0, 4}), values, values * 0.05);
  EXPECT_EQ(signal.AdmittedValues({0, 0, 0, 5}), 0.0);
}

}  // namespace
}  // namespace ps::train
