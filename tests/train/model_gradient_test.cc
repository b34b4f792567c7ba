// Every model's analytic gradients against central finite differences of
// its summed loss, on a small batch with repeated keys, several fields,
// non-unit values and both labels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "worker/train/model.h"

namespace ps::train {
namespace {

data::ExampleBatch SmallBatch() {
  data::ExampleBatch b;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> id(0, 6);  // few ids: many repeats
  std::uniform_real_distribution<float> value(0.5f, 1.5f);
  for (int e = 0; e < 6; ++e) {
    for (uint32_t f = 0; f < 4; ++f) {
      // Drawn one at a time: the order of a call's argument evaluation is
      // the compiler's (GCC right to left, clang left to right).
      const float v = value(rng);
      b.AddFeature(100 + id(rng), v, f);
    }
    if (e % 2 == 0) b.AddFeature(7, 1.0f, 5);  // field beyond num_fields
    b.EndExample(e % 3 == 0 ? 1.0f : 0.0f);
  }
  return b;
}

void CheckGradients(const ModelOptions& options) {
  auto made = MakeModel(options);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const Model& model = **made;
  data::ExampleBatch batch = SmallBatch();
  BatchKeys keys;
  std::vector<uint32_t> scratch;
  GatherBatchKeys(batch, &keys, &scratch);
  ASSERT_EQ(keys.keys[keys.bias_slot], kBiasKey);

  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> rows(keys.keys.size() * model.sparse_dim());
  std::vector<float> dense(model.dense_size());
  for (float& v : rows) v = normal(rng);
  for (float& v : dense) v = normal(rng);
  std::vector<float> probs(batch.size());
  BatchGrads grads;
  auto loss_at = [&]() {
    return model.Compute(batch, keys, BatchParams{rows, dense}, probs, nullptr);
  };
  const double loss =
      model.Compute(batch, keys, BatchParams{rows, dense}, probs, &grads);
  EXPECT_NEAR(loss, loss_at(), 1e-9);
  ASSERT_EQ(grads.rows.size(), rows.size());
  ASSERT_EQ(grads.dense.size(), dense.size());
  for (float p : probs) EXPECT_TRUE(p > 0.0f && p < 1.0f);

  auto check = [&](std::vector<float>& params, const std::vector<float>& g,
                   const char* what) {
    int checked = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const float saved = params[i];
      const float eps = 1e-2f;
      params[i] = saved + eps;
      const double up = loss_at();
      params[i] = saved - eps;
      const double down = loss_at();
      params[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(g[i], numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << model.name() << " " << what << " parameter " << i;
      checked += std::abs(numeric) > 1e-4;
    }
    return checked;
  };
  EXPECT_GT(check(rows, grads.rows, "sparse"), 5);
  if (!dense.empty()) {
    EXPECT_GT(check(dense, grads.dense, "dense"), 20);
  }
}

TEST(ModelGradientTest, LogisticRegression) {
  ModelOptions o;
  o.name = "lr";
  CheckGradients(o);
}

TEST(ModelGradientTest, FactorizationMachine) {
  ModelOptions o;
  o.name = "fm";
  o.fm_dim = 3;
  CheckGradients(o);
}

TEST(ModelGradientTest, DeepFm) {
  ModelOptions o;
  o.name = "deepfm";
  o.fm_dim = 3;
  o.num_fields = 4;
  o.hidden = {5, 4};
  CheckGradients(o);
}

// A step's L2 is shared among the workers that push it; one worker (or
// --local) adds all of it.
TEST(ModelGradientTest, TheL2OfAStepIsSharedAmongItsWorkers) {
  const L2Options step{.w = 0.25f, .v = 0.5f};
  EXPECT_EQ(L2ShareOfStep(step, 1).w, 0.25f);
  EXPECT_EQ(L2ShareOfStep(step, 1).v, 0.5f);
  EXPECT_EQ(L2ShareOfStep(step, 0).v, 0.5f);
  EXPECT_EQ(L2ShareOfStep(step, 2).w, 0.125f);
  EXPECT_EQ(L2ShareOfStep(step, 4).v, 0.125f);
}

// L2 adds lambda * row to the gradient of every row the batch uses, once,
// w and v with their own lambda, and leaves the bias and the loss alone.
TEST(ModelGradientTest, RowL2AddsLambdaTimesTheRowOnce) {
  for (const char* name : {"lr", "fm", "deepfm"}) {
    ModelOptions plain;
    plain.name = name;
    plain.fm_dim = 3;
    plain.num_fields = 4;
    plain.hidden = {5};
    ModelOptions regularised = plain;
    regularised.l2 = {.w = 0.25f, .v = 0.5f};
    auto a = MakeModel(plain), b = MakeModel(regularised);
    ASSERT_TRUE(a.ok() && b.ok());
    data::ExampleBatch batch = SmallBatch();
    BatchKeys keys;
    std::vector<uint32_t> scratch;
    GatherBatchKeys(batch, &keys, &scratch);
    const uint32_t dim = (*a)->sparse_dim();
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    std::vector<float> rows(keys.keys.size() * dim);
    std::vector<float> dense((*a)->dense_size());
    for (float& v : rows) v = normal(rng);
    for (float& v : dense) v = normal(rng);
    std::vector<float> probs(batch.size());
    BatchGrads ga, gb;
    const double la = (*a)->Compute(batch, keys, {rows, dense}, probs, &ga);
    const double lb = (*b)->Compute(batch, keys, {rows, dense}, probs, &gb);
    EXPECT_EQ(la, lb) << name;
    ASSERT_EQ(ga.rows.size(), gb.rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t r = i / dim, c = i % dim;
      const float lambda = r == keys.bias_slot ? 0.0f : (c == 0 ? 0.25f : 0.5f);
      EXPECT_NEAR(gb.rows[i] - ga.rows[i], lambda * rows[i], 1e-5)
          << name << " row " << r << " column " << c;
    }
    EXPECT_EQ(ga.dense, gb.dense) << name;
  }
  ModelOptions negative;
  negative.l2.v = -1.0f;
  EXPECT_FALSE(MakeModel(negative).ok());
}

TEST(ModelGradientTest, UnknownModelAndBadSizesAreErrors) {
  ModelOptions o;
  o.name = "svm";
  EXPECT_FALSE(MakeModel(o).ok());
  o.name = "fm";
  o.fm_dim = 0;
  EXPECT_FALSE(MakeModel(o).ok());
  o.name = "deepfm";
  o.fm_dim = 4;
  o.hidden = {0};
  EXPECT_FALSE(MakeModel(o).ok());
}

TEST(ModelGradientTest, BatchKeysAreDistinctAndMapBack) {
  data::ExampleBatch batch = SmallBatch();
  BatchKeys keys;
  std::vector<uint32_t> scratch;
  GatherBatchKeys(batch, &keys, &scratch);
  std::vector<uint64_t> sorted = keys.keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (size_t j = 0; j < batch.ids.size(); ++j) {
    EXPECT_EQ(keys.keys[keys.slot[j]], batch.ids[j]);
  }
  EXPECT_EQ(keys.keys.size(), 9u);  // 7 ids + id 7 + the bias
}

}  // namespace
}  // namespace ps::train
