// Retention keeps the newest K complete checkpoints and every parent they
// need; it deletes older complete ones and stale incomplete ones, and never
// an incomplete one newer than the newest complete (it may be in progress).
// A kill -9 at any point of it leaves a root that `ps_ckpt verify --dir`
// passes. FreeSpaceForCheckpoint is retention down to the newest complete
// checkpoint and its chain. The checkpoint the best marker (BEST, early
// stopping) names is exempt with its chain, until a newer best replaces it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/best_marker.h"
#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Model;
using testing::Steps;
using testing::TempDir;

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

TEST(CheckpointRetention, KeepsTheBestWithItsChainUntilANewerBest) {
  TempDir dir;
  Model model;
  model.hashed_capacity = 1000;
  model.exact_keys = 50;
  std::function<bool(uint32_t, uint64_t)> changed = [](uint32_t, uint64_t id) {
    return id % 10 == 0;
  };
  // 10 full, 20 incremental on it (the best), then 30 and 40 full.
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 10, 1).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 20, 1,
                                       CheckpointDirName(10), &changed)
                  .ok());
  proto::BestMarker best;
  best.set_step(20);
  best.set_eval_logloss(0.5);
  ASSERT_TRUE(WriteBestMarker(dir.path(), best).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 30, 1).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 40, 1).ok());
  ASSERT_TRUE(ApplyRetention(dir.path(), 1).ok());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{10, 20, 40}));
  auto read = ReadBestMarker(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->step(), 20u);
  EXPECT_DOUBLE_EQ(read->eval_logloss(), 0.5);
  // Freeing space for a failed write keeps it too.
  ASSERT_TRUE(FreeSpaceForCheckpoint(dir.path()).ok());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{10, 20, 40}));
  // A newer best releases the older one and its chain.
  best.set_step(40);
  ASSERT_TRUE(WriteBestMarker(dir.path(), best).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 50, 1).ok());
  ASSERT_TRUE(ApplyRetention(dir.path(), 1).ok());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{40, 50}));
}

TEST(CheckpointRetention, ADamagedBestMarkerDeletesNothing) {
  TempDir dir;
  Model model;
  model.hashed_capacity = 100;
  model.exact_keys = 5;
  for (uint64_t step = 1; step <= 3; ++step) {
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, step, 1).ok());
  }
  EXPECT_TRUE(ReadBestMarker(dir.path()).status().Is(StatusCode::kNotFound));
  std::ofstream(JoinPath(dir.path(), kBestMarkerName)) << "not framed";
  auto deleted = ApplyRetention(dir.path(), 1);
  ASSERT_FALSE(deleted.ok());
  EXPECT_TRUE(deleted.status().Is(StatusCode::kCorruption)) << deleted.status();
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{1, 2, 3}));
}

// What `ps_ckpt verify --dir` checks: every checkpoint that reads as complete
// verifies, parents included (present and intact), and nothing is a damaged
// MANIFEST. Empty when it passes, else what fails.
std::string VerifyRoot(const std::string& root) {
  auto all = ListCheckpoints(root);
  if (!all.ok()) return all.status().ToString();
  std::string problems;
  for (const auto& c : *all) {
    if (!c.complete) {
      if (!c.manifest_status.Is(StatusCode::kNotFound)) {
        problems += c.name + ": " + c.manifest_status.ToString() + "\n";
      }
      continue;
    }
    auto m = VerifyCheckpoint(c.path);
    if (!m.ok()) problems += c.name + ": " + m.status().ToString() + "\n";
  }
  return problems;
}

std::function<bool(uint32_t, uint64_t)> SomeRowsChanged() {
  return [](uint32_t, uint64_t id) { return id % 10 == 0; };
}

// Two chains and an interrupted checkpoint between them: 10 full, 20 and 30
// incremental on it, 35 incomplete, 40 full, 50 and 60 incremental on it, and
// 70 in progress (shard written, no MANIFEST).
void WriteTwoChains(const std::string& root, const Model& model) {
  auto changed = SomeRowsChanged();
  ASSERT_TRUE(testing::WriteCheckpoint(root, model, 10, 1).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(root, model, 20, 1,
                                       CheckpointDirName(10), &changed)
                  .ok());
  ASSERT_TRUE(testing::WriteCheckpoint(root, model, 30, 1,
                                       CheckpointDirName(20), &changed)
                  .ok());
  ASSERT_TRUE(WriteShard(JoinPath(root, CheckpointDirName(35)),
                         model.Snapshot(0, 1, 35), {})
                  .ok());
  ASSERT_TRUE(testing::WriteCheckpoint(root, model, 40, 1).ok());
  ASSERT_TRUE(testing::WriteCheckpoint(root, model, 50, 1,
                                       CheckpointDirName(40), &changed)
                  .ok());
  ASSERT_TRUE(testing::WriteCheckpoint(root, model, 60, 1,
                                       CheckpointDirName(50), &changed)
                  .ok());
  ShardWriteOptions in_progress;
  in_progress.kind = proto::INCREMENTAL;
  in_progress.parent = CheckpointDirName(60);
  ASSERT_TRUE(WriteShard(JoinPath(root, CheckpointDirName(70)),
                         model.Snapshot(0, 1, 70, &changed), in_progress)
                  .ok());
}

Model SmallModel() {
  Model model;
  model.hashed_capacity = 1000;
  model.exact_keys = 50;
  return model;
}

// A kill -9 between two deletions leaves the root as the hook sees it; one
// inside a deletion leaves the checkpoint without its MANIFEST, which reads
// as the root after it (the next hook call, or the end). Every such root
// must verify: no incremental may read as complete on a deleted base.
TEST(CheckpointRetention, KillAtAnyPointLeavesOnlyWholeChains) {
  TempDir dir;
  const Model model = SmallModel();
  WriteTwoChains(dir.path(), model);
  ASSERT_EQ(VerifyRoot(dir.path()), "");
  int deletions = 0;
  RetentionHooks hooks;
  hooks.before_delete = [&](const std::string& path) {
    ++deletions;
    EXPECT_EQ(VerifyRoot(dir.path()), "")
        << "a kill -9 before deleting " << path << " leaves this behind";
  };
  auto deleted = ApplyRetention(dir.path(), 1, hooks);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deletions, 4);  // 35, 30, 20, 10
  EXPECT_EQ(VerifyRoot(dir.path()), "");
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{40, 50, 60, 70}));
}

TEST(CheckpointRetention, FreeSpaceKeepsOnlyTheNewestCompleteChain) {
  TempDir dir;
  const Model model = SmallModel();
  WriteTwoChains(dir.path(), model);
  auto deleted = FreeSpaceForCheckpoint(dir.path());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  const std::vector<std::string> want = {
      JoinPath(dir.path(), CheckpointDirName(35)),
      JoinPath(dir.path(), CheckpointDirName(30)),
      JoinPath(dir.path(), CheckpointDirName(20)),
      JoinPath(dir.path(), CheckpointDirName(10))};
  EXPECT_EQ(*deleted, want);
  // 60 and its parents stay, and 70 (in progress on top of it).
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{40, 50, 60, 70}));
  auto t = model.MakeTarget(0, 1);
  auto r = RestoreLatest(dir.path(), {}, &t.target);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, JoinPath(dir.path(), CheckpointDirName(60)));
  model.ExpectRestored(t.target);
  // Nothing more to free: the caller's retry would fail again.
  deleted = FreeSpaceForCheckpoint(dir.path());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(deleted->empty());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{40, 50, 60, 70}));
}

TEST(CheckpointRetention, FreeSpaceWithoutACompleteCheckpointDeletesNothing) {
  TempDir dir;
  const Model model = SmallModel();
  // Only interrupted ones: each may be the one in progress.
  ASSERT_TRUE(WriteShard(JoinPath(dir.path(), CheckpointDirName(5)),
                         model.Snapshot(0, 1, 5), {})
                  .ok());
  auto deleted = FreeSpaceForCheckpoint(dir.path());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(deleted->empty());
  EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{5}));
  auto missing = FreeSpaceForCheckpoint(JoinPath(dir.path(), "nope"));
  EXPECT_TRUE(missing.status().Is(StatusCode::kNotFound)) << missing.status();
}

}  // namespace
}  // namespace ps::checkpoint
