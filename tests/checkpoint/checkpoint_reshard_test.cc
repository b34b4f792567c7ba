// Restoring onto a different number of servers: every key's row and
// optimizer state on every new shard equals the saved one exactly, for
// range-partitioned (HASHED, DENSE) and hash-partitioned (EXACT) tables.
#include <gtest/gtest.h>

#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Model;
using testing::TempDir;

void SaveAndRestore(uint32_t saved_shards, uint32_t new_shards) {
  TempDir dir;
  Model model;
  auto m = testing::WriteCheckpoint(dir.path(), model, 40, saved_shards);
  ASSERT_TRUE(m.ok()) << m.status();
  uint64_t hashed_rows = 0, exact_rows = 0;
  for (uint32_t k = 0; k < new_shards; ++k) {
    auto t = model.MakeTarget(k, new_shards);
    auto r = RestoreLatest(dir.path(), {}, &t.target);
    ASSERT_TRUE(r.ok()) << r.status();
    model.ExpectRestored(t.target);
    hashed_rows += t.target.tables[0].rows_restored;
    exact_rows += t.target.tables[2].rows_restored;
  }
  // Every key lands on exactly one new shard.
  EXPECT_EQ(hashed_rows, model.hashed_capacity);
  EXPECT_EQ(exact_rows, model.exact_keys);
}

TEST(CheckpointReshard, TwoShardsOntoThree) { SaveAndRestore(2, 3); }
TEST(CheckpointReshard, ThreeShardsOntoOne) { SaveAndRestore(3, 1); }
TEST(CheckpointReshard, OneShardOntoFour) { SaveAndRestore(1, 4); }

TEST(CheckpointReshard, IncrementalChainOntoOtherLayout) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 10, 2).ok());
  model.version = [](uint32_t, uint64_t id) { return id % 7 == 0 ? 1u : 0u; };
  std::function<bool(uint32_t, uint64_t)> changed = [](uint32_t, uint64_t id) {
    return id % 7 == 0;
  };
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 20, 2,
                                       CheckpointDirName(10), &changed)
                  .ok());
  for (uint32_t k = 0; k < 3; ++k) {
    auto t = model.MakeTarget(k, 3);
    auto r = RestoreLatest(dir.path(), {}, &t.target);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->chain.size(), 2u);
    model.ExpectRestored(t.target);
  }
}

}  // namespace
}  // namespace ps::checkpoint
