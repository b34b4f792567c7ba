// Early stopping's parts on their own: EarlyStop's verdicts (the best is the
// lowest eval logloss; `patience` points without a new best stop; NaN is
// never the best), and LocalParamStore's kept copy (--local's best
// parameters): brought back exactly, optimizer state included.
#include "worker/train/early_stop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "protocol/table_config.h"
#include "worker/train/local_param_store.h"

namespace ps::train {
namespace {

EvalPoint At(uint64_t step, double logloss) {
  EvalPoint p;
  p.step = step;
  p.logloss = logloss;
  return p;
}

TEST(EarlyStopTest, StopsAfterPatiencePointsWithoutANewBest) {
  EarlyStop e(2);
  EXPECT_FALSE(e.best().has_value());
  auto v = e.Observe(At(10, 0.50));
  EXPECT_TRUE(v.best);
  EXPECT_FALSE(v.stop);
  v = e.Observe(At(20, 0.52));  // one without: goes on
  EXPECT_FALSE(v.best);
  EXPECT_FALSE(v.stop);
  v = e.Observe(At(30, 0.49));  // a new best resets the count
  EXPECT_TRUE(v.best);
  EXPECT_FALSE(v.stop);
  v = e.Observe(At(40, 0.49));  // equal is not better
  EXPECT_FALSE(v.best);
  EXPECT_FALSE(v.stop);
  v = e.Observe(At(50, 0.60));
  EXPECT_FALSE(v.best);
  EXPECT_TRUE(v.stop);
  ASSERT_TRUE(e.best().has_value());
  EXPECT_EQ(e.best()->step, 30u);
  EXPECT_DOUBLE_EQ(e.best()->logloss, 0.49);
}

TEST(EarlyStopTest, PatienceOneStopsAtTheFirstPointWithoutABest) {
  EarlyStop e(1);
  EXPECT_FALSE(e.Observe(At(1, 0.7)).stop);
  EXPECT_TRUE(e.Observe(At(2, 0.8)).stop);
}

TEST(EarlyStopTest, ANaNLoglossIsNeverTheBestAndCountsAgainstPatience) {
  EarlyStop e(2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto v = e.Observe(At(1, nan));
  EXPECT_FALSE(v.best);
  EXPECT_FALSE(e.best().has_value());
  v = e.Observe(At(2, nan));
  EXPECT_TRUE(v.stop);
}

TEST(EarlyStopTest, LocalStoreBringsBackTheKeptCopyExactly) {
  auto config = protocol::ParseTableConfig(
      R"(table { id: 1 name: "emb" kind: HASHED dim: 3 capacity: 1024
         optimizer { name: "adagrad" learning_rate: 0.5 }
         initializer { name: "normal" scale: 0.1 seed: 3 } })");
  ASSERT_TRUE(config.ok()) << config.status();
  auto created = LocalParamStore::Create(*config);
  ASSERT_TRUE(created.ok()) << created.status();
  LocalParamStore& store = **created;
  EXPECT_TRUE(store.RestoreCopy().Is(StatusCode::kNotInitialized));
  const std::vector<uint64_t> keys = {7, 99};
  const std::vector<float> grads = {1, -2, 3, 0.5f, 0.25f, -1};
  ASSERT_TRUE(store.Push(1, keys, grads).ok());
  std::vector<float> kept(6);
  ASSERT_TRUE(store.Pull(1, keys, kept).ok());
  ASSERT_TRUE(store.KeepCopy().ok());
  // Two more pushes move the rows; their effect depends on the adagrad
  // accumulators, so a copy without the state would not replay alike.
  ASSERT_TRUE(store.Push(1, keys, grads).ok());
  std::vector<float> moved(6);
  ASSERT_TRUE(store.Pull(1, keys, moved).ok());
  EXPECT_NE(moved, kept);
  ASSERT_TRUE(store.Push(1, keys, grads).ok());
  std::vector<float> twice(6);
  ASSERT_TRUE(store.Pull(1, keys, twice).ok());
  ASSERT_TRUE(store.RestoreCopy().ok());
  std::vector<float> back(6);
  ASSERT_TRUE(store.Pull(1, keys, back).ok());
  EXPECT_EQ(back, kept);
  // The state came back too: the same push gives the same rows again.
  ASSERT_TRUE(store.Push(1, keys, grads).ok());
  ASSERT_TRUE(store.Pull(1, keys, back).ok());
  EXPECT_EQ(back, moved);
}

}  // namespace
}  // namespace ps::train
