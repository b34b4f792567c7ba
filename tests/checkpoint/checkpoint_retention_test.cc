// Retention keeps the newest K complete checkpoints and every parent they
// need; it deletes older complete ones and stale incomplete ones, and never
// an incomplete one newer than the newest complete (it may be in progress).
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Model;
using testing::TempDir;

std::vector<uint64_t> Steps(const std::string& root) {
  std::vector<uint64_t> s;
  auto all = ListCheckpoints(root);
  EXPECT_TRUE(all.ok()) << all.status();
  if (!all.ok()) return s;
  for (const auto& c : *all) s.push_back(c.step);
  return s;
}

TEST(CheckpointRetention, KeepsLastKFull) {
  TempDir dir;
  Model model;
  model.hashed_capacity = 1000;
  model.exact_keys = 50;
  for (uint64_t step = 1; step <= 5; ++step) {
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, step, 1).ok());
  }
  // An interrupted old one, and one in progress.
  std::filesystem::create_directories(
      JoinPath(dir.path(), CheckpointDirName(3) + "x"));  // not ours: kept
  ASSERT_TRUE(WriteShard(JoinPath(dir.path(), CheckpointDirName(6)),
                         model.Snapshot(0, 1, 6), {})
                  .ok());
  auto deleted = ApplyRetention(dir.path(), 2);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->size(), 3u);
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{4, 5, 6}));
  EXPECT_TRUE(std::filesystem::exists(
      JoinPath(dir.path(), CheckpointDirName(3) + "x")));
}

TEST(CheckpointRetention, KeepsTheChainsOfRetainedIncrementals) {
  TempDir dir;
  Model model;
  model.hashed_capacity = 1000;
  model.exact_keys = 50;
  std::function<bool(uint32_t, uint64_t)> changed = [](uint32_t, uint64_t id) {
    return id % 10 == 0;
  };
  // 10 full, 20 and 30 incremental on it, 40 full, 50 incremental on 40.
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 10, 1).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 20, 1,
                                       CheckpointDirName(10), &changed)
                  .ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 30, 1,
                                       CheckpointDirName(20), &changed)
                  .ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 40, 1).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 50, 1,
                                       CheckpointDirName(40), &changed)
                  .ok());
  // Keep 3: 50 (needs 40), 40, 30 (needs 20, 10).
  ASSERT_TRUE(ApplyRetention(dir.path(), 3).ok());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{10, 20, 30, 40, 50}));
  // Keep 2: 50 and 40; 30's chain goes.
  ASSERT_TRUE(ApplyRetention(dir.path(), 2).ok());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{40, 50}));
  auto t = model.MakeTarget(0, 1);
  auto r = RestoreLatest(dir.path(), {}, &t.target);
  ASSERT_TRUE(r.ok()) << r.status();
  model.ExpectRestored(t.target);
  // Keep 1: 50 still needs 40.
  ASSERT_TRUE(ApplyRetention(dir.path(), 1).ok());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{40, 50}));
}

}  // namespace
}  // namespace ps::checkpoint
