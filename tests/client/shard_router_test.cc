// ShardRouter must give exactly ShardMap's answers: workers and servers agree
// on row addresses only if the fast path and the reference never differ.
#include "client/shard_router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ps::worker {
namespace {

proto::TableSpec Spec(proto::TableKind kind, uint64_t capacity, uint32_t id) {
  proto::TableSpec s;
  s.set_id(id);
  s.set_kind(kind);
  s.set_capacity(capacity);
  s.set_dim(1);
  return s;
}

TEST(ShardRouterTest, MatchesShardMapForManyCapacitiesAndShardCounts) {
  std::mt19937_64 rng(7);
  // Realistic capacities (ShardMap's capacity * shard products must not
  // overflow).
  const uint64_t capacities[] = {1,    2,        3,        7,
                                 1000, 16777216, 16777213, (1ull << 40) + 5};
  for (uint64_t cap : capacities) {
    for (uint32_t shards : {1u, 2u, 3u, 5u, 16u, 17u}) {
      if (shards > cap) continue;
      proto::TableSpec spec = Spec(proto::HASHED, cap, 3);
      ShardRouter loc(spec, shards);
      protocol::ShardMap ref = protocol::ShardMap::ForTable(spec, shards);
      for (int i = 0; i < 20000; ++i) {
        const uint64_t key = i < 100 ? static_cast<uint64_t>(i) : rng();
        const protocol::RowLocation want = ref.Locate(key);
        const uint64_t row = loc.GlobalRow(key);
        ASSERT_EQ(row, want.global_row) << "cap " << cap << " key " << key;
        ASSERT_EQ(loc.ShardOfRow(row), want.shard) << "cap " << cap;
      }
    }
  }
}

// The batch form (AVX-512 where the CPU has it) gives the scalar rows,
// tails shorter than a vector and power-of-two capacities (a mask) included.
TEST(ShardRouterTest, BatchRowsAreTheScalarRows) {
  std::mt19937_64 rng(11);
  std::vector<uint64_t> keys(1027);
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = i < 8 ? ~uint64_t{0} - i : rng();
  }
  std::vector<uint64_t> rows(keys.size());
  for (uint64_t cap :
       {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{16777216},
        uint64_t{16777213}, uint64_t{1} << 40, (uint64_t{1} << 40) + 5,
        ~uint64_t{0} >> 1}) {
    for (proto::TableKind kind : {proto::HASHED, proto::DENSE}) {
      ShardRouter loc(Spec(kind, cap, 9), 1);
      for (size_t n : {size_t{0}, size_t{7}, size_t{8}, keys.size()}) {
        std::fill(rows.begin(), rows.end(), 0);
        loc.row_hash().GlobalRows(keys.data(), n, rows.data());
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(rows[i], loc.GlobalRow(keys[i]))
              << "cap " << cap << " key " << keys[i];
        }
      }
    }
  }
}

TEST(ShardRouterTest, FastModIsExactAtTheEdges) {
  for (uint64_t cap : std::initializer_list<uint64_t>{
           1ull, 3ull, 1000003ull, (1ull << 63) + 1, UINT64_MAX}) {
    ShardRouter loc(Spec(proto::HASHED, cap, 0), 1);
    for (uint64_t x : std::initializer_list<uint64_t>{
             0ull, 1ull, cap - 1, cap, cap + 1, UINT64_MAX, UINT64_MAX - 1,
             UINT64_MAX / 2}) {
      EXPECT_EQ(loc.row_hash().FastMod(x), x % cap)
          << "x " << x << " cap " << cap;
    }
  }
}

TEST(ShardRouterTest, DenseTablesUseTheKeyAsRow) {
  ShardRouter loc(Spec(proto::DENSE, 100, 1), 3);
  protocol::ShardMap ref(100, 3, proto::DENSE, 1);
  for (uint64_t k = 0; k < 100; ++k) {
    EXPECT_EQ(loc.GlobalRow(k), k);
    EXPECT_EQ(loc.ShardOfRow(k), ref.Locate(k).shard);
  }
}

}  // namespace
}  // namespace ps::worker
