// LocalParamStore keeps the server's semantics: rows start as the server
// initializes them (by global row), pushes sum duplicate keys and go through
// the table's optimizer, dense tables are whole, bad calls are errors.
#include "worker/train/local_param_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "protocol/table_config.h"
#include "table/initializer.h"

namespace ps::train {
namespace {

std::unique_ptr<LocalParamStore> Store(const std::string& text) {
  auto config = protocol::ParseTableConfig(text);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto store = LocalParamStore::Create(*config);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(*store);
}

TEST(LocalParamStoreTest, RowsStartLikeTheServersRows) {
  auto store = Store(R"(table { id: 3 name: "emb" kind: HASHED dim: 4
      capacity: 1000 optimizer { name: "sgd" learning_rate: 0.1 }
      initializer { name: "normal" scale: 0.5 seed: 9 } })");
  const proto::TableSpec* spec = store->table("emb");
  ASSERT_NE(spec, nullptr);
  protocol::ShardMap map = protocol::ShardMap::ForTable(*spec, 1);
  for (uint64_t key : {1ull, 42ull, 1ull << 40}) {
    std::vector<float> want(4);
    table::InitializeRow(spec->initializer(), map.GlobalRow(key), want);
    std::vector<float> got(4);
    ASSERT_TRUE(store->Pull(3, std::vector<uint64_t>{key}, got).ok());
    EXPECT_EQ(got, want);
    EXPECT_NE(got[0], 0.0f);
  }
}

TEST(LocalParamStoreTest, SgdPushSumsDuplicateKeys) {
  auto store = Store(R"(table { id: 1 name: "w" kind: HASHED dim: 2
      capacity: 1048576 optimizer { name: "sgd" learning_rate: 0.5 } })");
  // Keys 5 and 6 land on different rows (hashing may make any two share).
  protocol::ShardMap map = protocol::ShardMap::ForTable(*store->table("w"), 1);
  ASSERT_NE(map.GlobalRow(5), map.GlobalRow(6));
  std::vector<uint64_t> keys = {5, 6, 5};
  std::vector<float> grads = {1, 2, 3, 4, 10, 20};
  ASSERT_TRUE(store->Push(1, keys, grads).ok());
  std::vector<float> out(4);
  ASSERT_TRUE(store->Pull(1, std::vector<uint64_t>{5, 6}, out).ok());
  EXPECT_FLOAT_EQ(out[0], -0.5f * 11);
  EXPECT_FLOAT_EQ(out[1], -0.5f * 22);
  EXPECT_FLOAT_EQ(out[2], -0.5f * 3);
  EXPECT_FLOAT_EQ(out[3], -0.5f * 4);
}

TEST(LocalParamStoreTest, AdagradStartsFromTheInitialAccumulator) {
  auto store = Store(R"(table { id: 1 name: "w" kind: HASHED dim: 1
      capacity: 64 optimizer { name: "adagrad" learning_rate: 0.1
      initial_accumulator: 0.25 epsilon: 1e-8 } })");
  ASSERT_TRUE(
      store->Push(1, std::vector<uint64_t>{9}, std::vector<float>{2.0f}).ok());
  auto row = store->Row(1, 9);
  ASSERT_TRUE(row.ok());
  // a = 0.25 + 4; w = -0.1 * 2 / sqrt(4.25)
  EXPECT_NEAR((*row)[0], -0.2 / std::sqrt(4.25), 1e-6);
  ASSERT_TRUE(
      store->Push(1, std::vector<uint64_t>{9}, std::vector<float>{2.0f}).ok());
  auto again = store->Row(1, 9);
  EXPECT_NEAR((*again)[0], -0.2 / std::sqrt(4.25) - 0.2 / std::sqrt(8.25),
              1e-6);
}

TEST(LocalParamStoreTest, DenseTableIsWhole) {
  auto store = Store(R"(table { id: 2 name: "mlp" kind: DENSE dim: 2
      capacity: 3 optimizer { name: "sum" }
      initializer { name: "uniform" scale: 1 seed: 4 } })");
  std::vector<float> before(6), after(6);
  ASSERT_TRUE(store->PullDense(2, before).ok());
  for (int r = 0; r < 3; ++r) {
    std::vector<float> want(2);
    table::InitializeRow(store->table("mlp")->initializer(), r, want);
    EXPECT_EQ(before[2 * r], want[0]);
    EXPECT_EQ(before[2 * r + 1], want[1]);
  }
  std::vector<float> grads = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(store->PushDense(2, grads).ok());
  ASSERT_TRUE(store->PullDense(2, after).ok());
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(after[i], before[i] + grads[i]);
  std::vector<float> five(5), two(2);
  EXPECT_FALSE(store->PullDense(2, five).ok());
  EXPECT_FALSE(store->Pull(2, std::vector<uint64_t>{3}, two).ok());  // row 3
}

TEST(LocalParamStoreTest, BadCallsAndConfigsAreErrors) {
  auto store = Store(R"(table { id: 1 name: "w" kind: HASHED dim: 2
      capacity: 8 optimizer { name: "sgd" learning_rate: 0.5 } })");
  std::vector<float> two(2), three(3), sixteen(16);
  EXPECT_FALSE(store->Pull(7, std::vector<uint64_t>{1}, two).ok());  // no table
  EXPECT_FALSE(store->Push(1, std::vector<uint64_t>{1}, three).ok());  // size
  EXPECT_FALSE(store->PullDense(1, sixteen).ok());                     // HASHED
  EXPECT_EQ(store->table("nope"), nullptr);
  auto exact = protocol::ParseTableConfig(R"(table { id: 1 name: "x"
      kind: EXACT dim: 2 capacity: 8 admit_after_pushes: 1
      optimizer { name: "sum" } })");
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(LocalParamStore::Create(*exact).status().code(),
            StatusCode::kNotSupported);
}

TEST(LocalParamStoreTest, ConcurrentPushesAllLand) {
  auto store = Store(R"(table { id: 1 name: "w" kind: HASHED dim: 1
      capacity: 128 optimizer { name: "sum" } })");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<uint64_t> keys = {1, 2, 3};
      std::vector<float> grads = {1, 1, 1};
      std::vector<float> out(3);
      for (int i = 0; i < 1000; ++i) {
        ASSERT_TRUE(store->Push(1, keys, grads).ok());
        ASSERT_TRUE(store->Pull(1, keys, out).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (uint64_t k : {1, 2, 3}) EXPECT_FLOAT_EQ((*store->Row(1, k))[0], 4000);
}

}  // namespace
}  // namespace ps::train
