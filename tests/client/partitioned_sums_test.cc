// PartitionedSums must give, shard by shard, the sorted distinct rows of a
// push and their sums with the bits of a sum in key order (what the
// servers' exactness tests and the other push paths rely on), whatever the
// number of threads, buckets and shards.
#include "client/partitioned_sums.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>

namespace ps::worker {
namespace {

using Sums = std::map<std::pair<uint32_t, uint32_t>, std::vector<float>>;

proto::TableSpec Spec(uint64_t capacity, uint32_t dim) {
  proto::TableSpec s;
  s.set_id(5);
  s.set_kind(proto::HASHED);
  s.set_capacity(capacity);
  s.set_dim(dim);
  return s;
}

// (shard, local row) -> sums added in key order.
Sums Reference(const ShardRouter& router, uint32_t dim,
               const std::vector<uint64_t>& keys,
               const std::vector<float>& grads) {
  Sums want;
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t row = router.GlobalRow(keys[i]);
    const uint32_t s = router.ShardOfRow(row);
    auto& v = want[{s, static_cast<uint32_t>(row - router.FirstRow(s))}];
    v.resize(dim);
    for (uint32_t j = 0; j < dim; ++j) v[j] += grads[i * dim + j];
  }
  return want;
}

// Sums the push on `pool` and gathers the runs, checked for order within
// each part and between parts.
Sums SumAndCollect(PartitionedSums& sums, const ShardRouter& router,
                   uint32_t dim, const std::vector<uint64_t>& keys,
                   const std::vector<float>& grads, SharedPool& pool) {
  struct Seen {
    Sums sums;
    int64_t shard = -1, row = -1;
  };
  std::vector<Seen> parts(pool.size());
  Status s = sums.Sum(
      router, dim, keys, grads, pool,
      [&](size_t part, uint32_t shard, std::span<const uint32_t> rows,
          std::span<const float> values) {
        Seen& seen = parts.at(part);
        EXPECT_EQ(values.size(), rows.size() * dim);
        EXPECT_GE(static_cast<int64_t>(shard), seen.shard);
        if (shard != seen.shard) seen.row = -1;
        seen.shard = shard;
        for (size_t i = 0; i < rows.size(); ++i) {
          EXPECT_GT(static_cast<int64_t>(rows[i]), seen.row);
          seen.row = rows[i];
          seen.sums[{shard, rows[i]}].assign(values.begin() + i * dim,
                                             values.begin() + (i + 1) * dim);
        }
        return Status::OK();
      });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(sums.parts(), parts.size());
  Sums all;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (auto& [at, v] : parts[p].sums) {
      EXPECT_TRUE(all.emplace(at, v).second) << "row in two parts";
      // Parts are in row order: nothing of part p is above part p + 1's.
      if (p + 1 < parts.size() && !parts[p + 1].sums.empty()) {
        EXPECT_LT(at, parts[p + 1].sums.begin()->first);
      }
    }
  }
  return all;
}

TEST(PartitionedSumsTest, SumsInKeyOrderForAnyThreadsBucketsAndShards) {
  struct Case {
    uint64_t capacity;
    uint32_t dim, shards;
    size_t keys;
  };
  // Several buckets per shard (a bucket spans 2^16 rows at dim 1, 2^12 at
  // dim 16); pushes big enough to be split between two threads. One and
  // several shards at dim 1 and above: each pair is a case of its own of
  // the partition pass.
  const Case cases[] = {{300000, 1, 1, 140000},
                        {300000, 1, 3, 140000},
                        {50000, 16, 1, 140000},
                        {50000, 16, 2, 140000},
                        {1000, 3, 2, 5000}};
  for (const Case& c : cases) {
    ShardRouter router(Spec(c.capacity, c.dim), c.shards);
    std::mt19937_64 rng(c.capacity + c.dim + c.shards);
    std::vector<uint64_t> keys(c.keys);
    for (auto& k : keys) k = rng() % (c.keys / 4);  // ~4 of each key
    std::vector<float> grads(c.keys * c.dim);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& g : grads) g = u(rng);  // not integers: the order shows
    const Sums want = Reference(router, c.dim, keys, grads);
    for (int threads : {1, 2}) {
      SharedPool pool(threads);
      PartitionedSums sums;
      for (int round = 0; round < 2; ++round) {  // scratch reused
        ASSERT_EQ(SumAndCollect(sums, router, c.dim, keys, grads, pool), want)
            << "capacity " << c.capacity << " dim " << c.dim << " shards "
            << c.shards << " threads " << threads << " round " << round;
      }
    }
  }
}

TEST(PartitionedSumsTest, AnEmptyPushHasNoRunsAndAnErrorStopsThePart) {
  ShardRouter router(Spec(1 << 20, 1), 2);
  SharedPool pool(2);
  PartitionedSums sums;
  EXPECT_TRUE(SumAndCollect(sums, router, 1, {}, {}, pool).empty());

  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> grads(keys.size(), 1.0f);
  int calls = 0;
  Status s = sums.Sum(
      router, 1, keys, grads, pool,
      [&](size_t, uint32_t, std::span<const uint32_t>, std::span<const float>) {
        ++calls;
        return PeerLost("inbox gone");
      });
  EXPECT_EQ(s.code(), StatusCode::kPeerLost);
  EXPECT_EQ(calls, 1);  // a small push is one part
}

}  // namespace
}  // namespace ps::worker
