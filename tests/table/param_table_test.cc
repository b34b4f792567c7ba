// ParamTable: rows start as the initializer makes them (in the caller's
// memory or its own), "sum" and "sgd" add, stateful optimizers keep state
// and count steps, bad rows change nothing, atomic applies from several
// threads lose no update, and a copy carries rows, state and steps.
#include "table/param_table.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ps::table
