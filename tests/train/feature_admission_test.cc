// CountMinSketch and FeatureAdmission: the sketch never under-counts (also
// when crowded, and under concurrent Adds of the same keys), saturates
// instead of wrapping; an id is admitted exactly at its Nth occurrence
// (ceil(N / workers) per worker), rare ids map to their field's OOV id,
// evaluation and frozen training count nothing.
#include "worker/train/feature_admission.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "worker/data/feature_hash.h"
#include "worker/train/count_min_sketch.h"

namespace ps::train {
namespace {

TEST(CountMinSketchTest, NeverUnderCountsWhenCrowded) {
  // 64 counters a row for 5000 keys with heavy-tailed counts: almost every
  // counter is shared, so estimates over-count, but none may fall short.
  CountMinSketch sketch(64);
  std::mt19937_64 rng(3);
  std::unordered_map<uint64_t, uint32_t> truth;
  for (int i = 0; i < 50000; ++i) {
    // Key k drawn with probability ~ 1/k: a few frequent, many rare.
    const uint64_t k = static_cast<uint64_t>(
        std::exp(std::uniform_real_distribution<double>(0, 8.5)(rng)));
    const uint64_t key = data::HashFeature(0, std::to_string(k));
    const uint32_t estimate = sketch.Add(key);
    ASSERT_GE(estimate, ++truth[key]);
  }
  uint64_t over = 0;
  for (const auto& [key, count] : truth) {
    EXPECT_GE(sketch.Estimate(key), count);
    over += sketch.Estimate(key) > count;
  }
  EXPECT_GT(over, 0u) << "a crowded sketch that never over-counts: the "
                         "test does not crowd it";
}

TEST(CountMinSketchTest, WideSketchCountsExactlyAndSaturates) {
  CountMinSketch sketch(1 << 16);
  EXPECT_EQ(sketch.width(), 1u << 16);
  EXPECT_EQ(sketch.Estimate(42), 0u);
  for (uint32_t i = 1; i <= 10; ++i) EXPECT_EQ(sketch.Add(42), i);
  EXPECT_EQ(sketch.Estimate(42), 10u);
  EXPECT_EQ(sketch.Estimate(43), 0u);
  for (uint32_t i = 0; i < CountMinSketch::kMaxCount + 100; ++i) {
    sketch.Add(7);
  }
  EXPECT_EQ(sketch.Estimate(7), CountMinSketch::kMaxCount);
  EXPECT_EQ(sketch.Estimate(42), 10u);
}

TEST(CountMinSketchTest, WidthForBytes) {
  EXPECT_EQ(CountMinSketch::WidthForBytes(uint64_t{32} << 20),
            uint64_t{1} << 22);  // 4 rows of 2^22 16-bit counters
  EXPECT_EQ(CountMinSketch::WidthForBytes(0), CountMinSketch::kMinWidth);
  EXPECT_EQ(CountMinSketch::WidthForBytes(uint64_t{1} << 50),
            CountMinSketch::kMaxWidth);
  EXPECT_EQ(CountMinSketch(1000).width(), 512u);
}

// Threads Add the same keys at once: the Adds of one key must not lose
// each other's increments (a wide sketch: no collisions, so exactly).
TEST(CountMinSketchTest, ConcurrentAddsOfTheSameKeysAreAllCounted) {
  CountMinSketch sketch(1 << 20);
  constexpr int kThreads = 4, kKeys = 64, kRounds = 2000;
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&sketch] {
      for (int r = 0; r < kRounds; ++r) {
        for (int k = 0; k < kKeys; ++k)
          sketch.Add(data::HashFeature(1, {}) + k);
      }
    });
  }
  // Estimates read while the Adds run only ever rise.
  uint32_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint32_t now = sketch.Estimate(data::HashFeature(1, {}));
    EXPECT_GE(now, last);
    last = now;
  }
  for (auto& t : pool) t.join();
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(sketch.Estimate(data::HashFeature(1, {}) + k),
              uint32_t{kThreads * kRounds})
        << "key " << k;
  }
}

data::ExampleBatch OneFeatureExamples(const std::vector<uint64_t>& ids,
                                      uint32_t field) {
  data::ExampleBatch batch;
  for (uint64_t id : ids) {
    batch.AddFeature(id, 1.0f, field);
    batch.EndExample(0);
  }
  return batch;
}

TEST(FeatureAdmissionTest, AnIdIsAdmittedAtItsNthOccurrence) {
  FeatureAdmission admission(3, 1, 1 << 20);
  EXPECT_EQ(admission.threshold(), 3u);
  const uint64_t a = data::HashFeature(5, "a"), b = data::HashFeature(5, "b");
  const uint64_t oov = data::OovFeature(5);
  EXPECT_NE(oov, a);
  EXPECT_NE(oov, data::OovFeature(6));
  EXPECT_NE(oov, data::MissingFeature(5));
  auto batch = OneFeatureExamples({a, a, b, a, a, b}, 5);
  admission.MapTraining(&batch);
  EXPECT_EQ(batch.ids, (std::vector<uint64_t>{oov, oov, oov, a, a, oov}));
  EXPECT_EQ(batch.fields, (std::vector<uint32_t>(6, 5)));
  AdmissionCounts c = admission.counts();
  EXPECT_EQ(c.occurrences_kept, 2u);
  EXPECT_EQ(c.occurrences_oov, 4u);
  EXPECT_EQ(c.distinct_seen, 2u);
  EXPECT_EQ(c.distinct_admitted, 1u);
  // Evaluation maps by the counts and does not count: b stays at 2.
  for (int i = 0; i < 3; ++i) {
    auto eval = OneFeatureExamples({a, b, data::HashFeature(5, "new")}, 5);
    admission.MapForEval(&eval);
    EXPECT_EQ(eval.ids, (std::vector<uint64_t>{a, oov, oov}));
  }
  // The third occurrence of b in training admits it.
  auto more = OneFeatureExamples({b, b}, 5);
  admission.MapTraining(&more);
  EXPECT_EQ(more.ids, (std::vector<uint64_t>{b, b}));
  EXPECT_EQ(admission.counts().distinct_admitted, 2u);
}

TEST(FeatureAdmissionTest, FrozenTrainingCountsNothing) {
  FeatureAdmission admission(2, 1, 1 << 20);
  const uint64_t a = data::HashFeature(0, "a");
  auto first = OneFeatureExamples({a}, 0);
  admission.MapTraining(&first);
  admission.Freeze();
  for (int i = 0; i < 3; ++i) {
    auto again = OneFeatureExamples({a}, 0);
    admission.MapTraining(&again);
    EXPECT_EQ(again.ids[0], data::OovFeature(0)) << "round " << i;
  }
  EXPECT_EQ(admission.counts().occurrences_oov, 4u);
}

TEST(FeatureAdmissionTest, CountOnlyThenMapsLikeTraining) {
  FeatureAdmission admission(2, 1, 1 << 20);
  const uint64_t a = data::HashFeature(0, "a"), b = data::HashFeature(0, "b");
  admission.CountOnly(OneFeatureExamples({a, a, b}, 0));
  admission.Freeze();
  auto eval = OneFeatureExamples({a, b}, 0);
  admission.MapForEval(&eval);
  EXPECT_EQ(eval.ids, (std::vector<uint64_t>{a, data::OovFeature(0)}));
}

TEST(FeatureAdmissionTest, ThresholdIsSharedOverWorkers) {
  EXPECT_EQ(FeatureAdmission(10, 1, 1 << 20).threshold(), 10u);
  EXPECT_EQ(FeatureAdmission(10, 3, 1 << 20).threshold(), 4u);
  EXPECT_EQ(FeatureAdmission(5, 8, 1 << 20).threshold(), 1u);
  FeatureAdmission one(1, 1, 1 << 20);
  auto batch = OneFeatureExamples({9, 10}, 0);
  one.MapTraining(&batch);
  EXPECT_EQ(batch.ids, (std::vector<uint64_t>{9, 10}));  // N = 1: all own
  EXPECT_NE(FeatureAdmission(10, 3, 1 << 20)
                .Describe()
                .find("occurrence 4 in this worker's share"),
            std::string::npos);
}

// Training threads map (and count) while an evaluating thread maps: every
// occurrence is counted once, whichever thread.
TEST(FeatureAdmissionTest, ConcurrentTrainingAndEvaluation) {
  FeatureAdmission admission(4, 1, 1 << 20);
  constexpr int kThreads = 3, kBatches = 200;
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 50; ++i)
    ids.push_back(data::HashFeature(2, std::to_string(i)));
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&] {
      for (int b = 0; b < kBatches; ++b) {
        auto batch = OneFeatureExamples(ids, 2);
        admission.MapTraining(&batch);
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    auto eval = OneFeatureExamples(ids, 2);
    admission.MapForEval(&eval);
  }
  for (auto& t : pool) t.join();
  const AdmissionCounts c = admission.counts();
  EXPECT_EQ(c.occurrences_kept + c.occurrences_oov,
            uint64_t{kThreads} * kBatches * ids.size());
  EXPECT_EQ(c.occurrences_oov, 3 * ids.size());  // occurrences 1 to 3
  EXPECT_EQ(c.distinct_admitted, ids.size());
}

TEST(FeatureAdmissionTest, AdaptiveThresholdsFollowEachFieldsSignal) {
  auto admission = FeatureAdmission::Adaptive(0.5, 1, 1 << 20);
  ASSERT_TRUE(admission->adaptive());
  // Field 0: values 0..999 seen 30 times each, half clicking at 0.1, half
  // at 0.5 (n* about 5); field 1: values seen 30 times, each as often
  // beside an odd value of field 0 as beside an even one, so all alike (no
  // signal); value 5000 of field 0 seen twice.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  data::ExampleBatch batch;
  for (int round = 0; round < 30; ++round) {
    for (uint64_t v = 0; v < 1000; ++v) {
      batch.AddFeature(v, 1.0f, 0);
      batch.AddFeature((uint64_t{1} << 32) | ((v + 37 * round) % 1000), 1.0f,
                       1);
      batch.EndExample(u(rng) < (v % 2 ? 0.5 : 0.1) ? 1.0f : 0.0f);
    }
  }
  for (int k = 0; k < 2; ++k) {
    batch.AddFeature(5000, 1.0f, 0);
    batch.EndExample(0);
  }
  admission->CountOnly(batch);
  admission->Freeze();
  const std::vector<uint32_t>& t = admission->field_thresholds();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_GE(t[0], 3u);
  EXPECT_LE(t[0], 10u);
  EXPECT_GT(t[1], 30u);  // more than any value of field 1 has
  EXPECT_EQ(admission->threshold(), t[0]);
  EXPECT_NE(admission->DescribeThresholds().find(" 0:" + std::to_string(t[0])),
            std::string::npos)
      << admission->DescribeThresholds();

  // Field 0's values have their own rows, from the first occurrence on;
  // field 1's and the rare one map to their OOV rows.
  data::ExampleBatch eval;
  eval.AddFeature(7, 1.0f, 0);
  eval.AddFeature((uint64_t{1} << 32) | 7, 1.0f, 1);
  eval.AddFeature(5000, 1.0f, 0);
  eval.AddFeature(424242, 1.0f, 2);  // a field never counted
  eval.EndExample(1);
  admission->MapForEval(&eval);
  EXPECT_EQ(eval.ids,
            (std::vector<uint64_t>{7, data::OovFeature(1), data::OovFeature(0),
                                   data::OovFeature(2)}));
  const AdmissionCounts c = admission->counts();
  EXPECT_NEAR(static_cast<double>(c.distinct_admitted), 1000, 1);
}

}  // namespace
}  // namespace ps::train
