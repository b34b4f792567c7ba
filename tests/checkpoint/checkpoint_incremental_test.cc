// Incremental checkpoints: after 1% of the rows change, an incremental
// checkpoint writes at most 5% of a full one's bytes (bytes on disk of the
// checkpoint directories), and restoring the chain gives the new values.
// EXACT keys that lost their row are deleted by tombstones.
#include <gtest/gtest.h>

#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Model;
using testing::TempDir;

TEST(CheckpointIncremental, OnePercentChangedWritesAtMostFivePercent) {
  TempDir dir;
  Model model;
  model.hashed_capacity = 200003;
  model.hashed_dim = 16;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 100, 2).ok());
  // 1% of the rows of every table change.
  auto is_changed = [](uint32_t, uint64_t id) {
    return protocol::Mix64(id) % 100 == 0;
  };
  model.version = [is_changed](uint32_t t, uint64_t id) {
    return is_changed(t, id) ? 1u : 0u;
  };
  std::function<bool(uint32_t, uint64_t)> changed = is_changed;
  auto m = testing::WriteCheckpoint(dir.path(), model, 200, 2,
                                    CheckpointDirName(100), &changed);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kind(), proto::INCREMENTAL);
  EXPECT_EQ(m->parent(), CheckpointDirName(100));

  const uint64_t full =
      BytesOnDisk(JoinPath(dir.path(), CheckpointDirName(100)));
  const uint64_t incremental =
      BytesOnDisk(JoinPath(dir.path(), CheckpointDirName(200)));
  RecordProperty("full_bytes", std::to_string(full));
  RecordProperty("incremental_bytes", std::to_string(incremental));
  EXPECT_LE(incremental * 20, full)
      << "incremental " << incremental << " bytes vs full " << full;

  for (uint32_t k = 0; k < 2; ++k) {
    auto t = model.MakeTarget(k, 2);
    auto r = RestoreLatest(dir.path(), {}, &t.target);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->chain.size(), 2u);
    model.ExpectRestored(t.target);
  }
}

TEST(CheckpointIncremental, ExactTombstonesDeleteKeys) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 1, 1).ok());
  // Increment: key 0 evicted, key 1 updated.
  ShardSnapshot snap;
  snap.step = 2;
  TableSnapshot t;
  t.spec = model.Specs()[2];
  t.full = false;
  t.state_arrays = 1;
  t.ids = {model.ExactKey(1)};
  t.values.assign(4, 7.0f);
  t.state[0].assign(4, 8.0f);
  t.last_update = {99};
  t.deleted = {model.ExactKey(0)};
  snap.tables.push_back(t);
  const std::string c2 = JoinPath(dir.path(), CheckpointDirName(2));
  ShardWriteOptions o;
  o.kind = proto::INCREMENTAL;
  o.parent = CheckpointDirName(1);
  ASSERT_TRUE(WriteShard(c2, snap, o).ok());
  CommitRequest c;
  c.checkpoint_dir = c2;
  c.step = 2;
  c.tables = model.Specs();
  ASSERT_TRUE(CommitCheckpoint(c).ok());

  auto target = model.MakeTarget(0, 1);
  auto r = RestoreLatest(dir.path(), {}, &target.target);
  ASSERT_TRUE(r.ok()) << r.status();
  const TableSnapshot& exact = target.target.tables[2].exact;
  EXPECT_EQ(exact.ids.size(), model.exact_keys - 1);
  bool found0 = false;
  for (size_t i = 0; i < exact.ids.size(); ++i) {
    if (exact.ids[i] == model.ExactKey(0)) found0 = true;
    if (exact.ids[i] == model.ExactKey(1)) {
      EXPECT_EQ(exact.values[i * 4], 7.0f);
      EXPECT_EQ(exact.state[0][i * 4 + 3], 8.0f);
      EXPECT_EQ(exact.last_update[i], 99u);
    }
  }
  EXPECT_FALSE(found0);
}

TEST(CheckpointIncremental, MissingParentIsNamed) {
  TempDir dir;
  Model model;
  std::function<bool(uint32_t, uint64_t)> changed = [](uint32_t, uint64_t) {
    return true;
  };
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 7, 1,
                                       CheckpointDirName(3), &changed)
                  .ok());
  auto t = model.MakeTarget(0, 1);
  auto r = RestoreLatest(dir.path(), {}, &t.target);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(CheckpointDirName(3)), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace ps::checkpoint
