// ParamTable: rows start as the initializer makes them (in the caller's
// memory or its own), "sum" and "sgd" add, stateful optimizers keep state
// and count steps, bad rows change nothing, atomic applies from several
// threads lose no update, a copy carries rows, state and steps, and a table
// that folds each step's pushes ends every step where one apply of the
// step's summed gradient ends.
#include "table/param_table.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "protocol/table_config.h"
#include "table/initializer.h"

namespace ps::table {
namespace {

using kernels::AccumulateMode;

proto::TableSpec Spec(const std::string& text) {
  auto config = protocol::ParseTableConfig(text);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config->table(0);
}

TEST(ParamTableTest, RowsStartByGlobalRowInTheCallersMemory) {
  const proto::TableSpec spec = Spec(R"(table { id: 1 name: "t" dim: 3
      capacity: 100 initializer { name: "uniform" scale: 0.5 seed: 4 } })");
  std::vector<float> memory(10 * 3, 0.0f);
  auto t = ParamTable::Create(spec, 40, 10, memory).value();
  EXPECT_EQ(t->data(), memory.data());
  EXPECT_EQ(t->first_row(), 40u);
  EXPECT_EQ(t->num_rows(), 10u);
  std::vector<float> want(3);
  InitializeRow(spec.initializer(), 45, want);
  EXPECT_EQ(std::vector<float>(memory.begin() + 15, memory.begin() + 18), want);
  EXPECT_FALSE(ParamTable::Create(spec, 0, 11, memory).ok());
}

TEST(ParamTableTest, SumAndSgdAdd) {
  auto sum = ParamTable::Create(Spec(R"(table { id: 1 name: "s" dim: 2
      capacity: 4 })"),
                                0, 4)
                 .value();
  std::vector<float> g = {1.5f, -2.0f};
  ASSERT_TRUE(
      sum->Apply(std::vector<uint32_t>{2}, g, AccumulateMode::kExclusive).ok());
  EXPECT_EQ(sum->data()[4], 1.5f);
  EXPECT_EQ(sum->data()[5], -2.0f);
  EXPECT_EQ(sum->state_arrays(), 0);

  auto sgd = ParamTable::Create(Spec(R"(table { id: 1 name: "s" dim: 2
      capacity: 4 optimizer { name: "sgd" learning_rate: 0.1 } })"),
                                0, 4)
                 .value();
  g = {1.5f, -2.0f};
  ASSERT_TRUE(
      sgd->Apply(std::vector<uint32_t>{1}, g, AccumulateMode::kAtomic).ok());
  EXPECT_EQ(sgd->data()[2], -0.1f * 1.5f);
  EXPECT_EQ(sgd->data()[3], -0.1f * -2.0f);
  EXPECT_EQ(sgd->bytes(), 4u * 2 * sizeof(float));
}

TEST(ParamTableTest, AdagradKeepsStateAndCountsSteps) {
  auto t = ParamTable::Create(Spec(R"(table { id: 1 name: "a" dim: 1
      capacity: 3 optimizer { name: "adagrad" learning_rate: 0.1
      initial_accumulator: 0.25 } })"),
                              0, 3)
               .value();
  ASSERT_EQ(t->state_arrays(), 1);
  EXPECT_EQ(t->state(0)[2], 0.25f);
  EXPECT_EQ(t->bytes(), 2u * 3 * sizeof(float));
  for (int i = 0; i < 3; ++i) {
    std::vector<float> g = {1.0f};
    ASSERT_TRUE(
        t->Apply(std::vector<uint32_t>{0}, g, AccumulateMode::kAtomic).ok());
  }
  EXPECT_EQ(t->optimizer_steps(), 3u);
  EXPECT_LT(t->data()[0], 0.0f);
  EXPECT_GT(t->state(0)[0], 0.25f);
  EXPECT_EQ(t->state(0)[1], 0.25f);

  std::vector<float> values, state[kernels::kMaxOptimizerStates];
  uint64_t steps = 0;
  t->CopyTo(&values, state, &steps);
  EXPECT_EQ(values, std::vector<float>(t->data(), t->data() + 3));
  EXPECT_EQ(state[0], std::vector<float>(t->state(0), t->state(0) + 3));
  EXPECT_EQ(steps, 3u);
  t->set_optimizer_steps(42);
  EXPECT_EQ(t->optimizer_steps(), 42u);
}

TEST(ParamTableTest, BadRowChangesNothing) {
  auto t = ParamTable::Create(Spec(R"(table { id: 1 name: "s" dim: 1
      capacity: 4 optimizer { name: "sgd" learning_rate: 1 } })"),
                              0, 4)
               .value();
  std::vector<float> g = {1.0f, 1.0f};
  EXPECT_TRUE(t->Apply(std::vector<uint32_t>{0, 4}, g, AccumulateMode::kAtomic)
                  .Is(StatusCode::kOutOfRange));
  for (uint64_t r = 0; r < 4; ++r) EXPECT_EQ(t->data()[r], 0.0f);
}

TEST(ParamTableTest, AtomicAppliesFromThreadsLoseNothing) {
  for (const char* opt : {"sgd", "adagrad"}) {
    auto t =
        ParamTable::Create(Spec(std::string(R"(table { id: 1 name: "c" dim: 4
        capacity: 8 optimizer { name: ")") +
                                opt + R"(" learning_rate: 1 } })"),
                           0, 8)
            .value();
    constexpr int kThreads = 4, kApplies = 1000;
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&] {
        const std::vector<uint32_t> rows = {0, 3, 7};
        for (int n = 0; n < kApplies; ++n) {
          std::vector<float> g(rows.size() * 4, -1.0f);
          ASSERT_TRUE(t->Apply(rows, g, AccumulateMode::kAtomic).ok());
        }
      });
    }
    for (auto& th : threads) th.join();
    if (std::string(opt) == "sgd") {
      EXPECT_EQ(t->data()[3 * 4 + 1], float{kThreads * kApplies}) << opt;
    } else {
      EXPECT_EQ(t->optimizer_steps(), uint64_t{kThreads * kApplies}) << opt;
    }
  }
}

// The rows, state and step count of `t`, to compare two tables.
struct Snapshot {
  std::vector<float> values, state[kernels::kMaxOptimizerStates];
  uint64_t steps = 0;
  explicit Snapshot(const ParamTable& t) { t.CopyTo(&values, state, &steps); }
};

std::unique_ptr<ParamTable> OptimizerTable(const std::string& optimizer) {
  return ParamTable::Create(
             Spec(R"(table { id: 1 name: "f" dim: 2 capacity: 5 optimizer )" +
                  optimizer +
                  R"( initializer { name: "normal" scale: 0.1 seed: 3 } })"),
             0, 5)
      .value();
}

TEST(ParamTableTest, FoldedPushesOfAStepEndWhereOneApplyOfTheirSumDoes) {
  for (const char* optimizer :
       {R"({ name: "adam" learning_rate: 0.01 })",
        R"({ name: "adagrad" learning_rate: 0.1 })",
        R"({ name: "ftrl" ftrl_alpha: 0.1 ftrl_l1: 0.01 })",
        R"({ name: "momentum" learning_rate: 0.1 })"}) {
    SCOPED_TRACE(optimizer);
    auto folded = OptimizerTable(optimizer);
    auto local = OptimizerTable(optimizer);
    ASSERT_TRUE(folded->FoldPushesOfEachStep());
    const auto m = AccumulateMode::kExclusive;
    // Step 7: two workers' pushes share row 1; step 8: one push.
    std::vector<float> g1 = {1.0f, -2.0f, 0.5f, 0.25f};  // rows 1, 3
    std::vector<float> g2 = {3.0f, 1.0f, -1.0f, 2.0f};   // rows 1, 2
    std::vector<float> g3 = {-0.5f, 4.0f};               // row 1
    ASSERT_TRUE(folded->ApplyPush(7, std::vector<uint32_t>{1, 3}, g1, m).ok());
    ASSERT_TRUE(folded->ApplyPush(7, std::vector<uint32_t>{1, 2}, g2, m).ok());
    ASSERT_TRUE(folded->ApplyPush(8, std::vector<uint32_t>{1}, g3, m).ok());

    std::vector<float> step7 = {1.0f + 3.0f, -2.0f + 1.0f, -1.0f, 2.0f,
                                0.5f,        0.25f};  // rows 1, 2, 3
    std::vector<float> step8 = {-0.5f, 4.0f};
    ASSERT_TRUE(local->Apply(std::vector<uint32_t>{1, 2, 3}, step7, m).ok());
    ASSERT_TRUE(local->Apply(std::vector<uint32_t>{1}, step8, m).ok());

    const Snapshot a(*folded), b(*local);
    EXPECT_EQ(a.values, b.values);
    for (int k = 0; k < kernels::kMaxOptimizerStates; ++k) {
      EXPECT_EQ(a.state[k], b.state[k]) << "state " << k;
    }
    EXPECT_EQ(a.steps, 2u);
    EXPECT_EQ(b.steps, 2u);
  }
}

TEST(ParamTableTest, SumAndSgdDoNotFold) {
  EXPECT_FALSE(ParamTable::Create(Spec(R"(table { id: 1 name: "s" dim: 1
      capacity: 4 })"),
                                  0, 4)
                   .value()
                   ->FoldPushesOfEachStep());
  EXPECT_FALSE(OptimizerTable(R"({ name: "sgd" learning_rate: 0.1 })")
                   ->FoldPushesOfEachStep());
}

TEST(ParamTableTest, AFoldedPushWithABadRowChangesNothing) {
  auto t = OptimizerTable(R"({ name: "adam" learning_rate: 0.01 })");
  ASSERT_TRUE(t->FoldPushesOfEachStep());
  std::vector<float> g = {1.0f, 1.0f};
  ASSERT_TRUE(t->ApplyPush(1, std::vector<uint32_t>{0}, g,
                           AccumulateMode::kExclusive)
                  .ok());
  const Snapshot before(*t);
  g = {1.0f, 1.0f, 1.0f, 1.0f};
  EXPECT_TRUE(t->ApplyPush(1, std::vector<uint32_t>{0, 5}, g,
                           AccumulateMode::kExclusive)
                  .Is(StatusCode::kOutOfRange));
  const Snapshot after(*t);
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(after.state[0], before.state[0]);
  EXPECT_EQ(after.steps, before.steps);
}

TEST(ParamTableTest, ARestoreForgetsTheStepBeingFolded) {
  // After set_optimizer_steps (a restore) a push of the step that was
  // being folded starts a step of its own: nothing saved before the
  // restore is put back.
  auto t = OptimizerTable(R"({ name: "adagrad" learning_rate: 0.1 })");
  ASSERT_TRUE(t->FoldPushesOfEachStep());
  std::vector<float> g = {1.0f, 1.0f};
  const auto m = AccumulateMode::kExclusive;
  ASSERT_TRUE(t->ApplyPush(4, std::vector<uint32_t>{0}, g, m).ok());
  t->set_optimizer_steps(10);
  const float restored = t->data()[0];
  g = {1.0f, 1.0f};
  ASSERT_TRUE(t->ApplyPush(4, std::vector<uint32_t>{0}, g, m).ok());
  EXPECT_EQ(t->optimizer_steps(), 11u);
  EXPECT_LT(t->data()[0], restored);
}

}  // namespace
}  // namespace ps::table
