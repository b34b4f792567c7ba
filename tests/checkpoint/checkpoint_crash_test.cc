// The crash test, with real processes: LR trains on generated rows
// (ps_datagen) with 2 ps_server and 2 ps_worker processes, BSP, a checkpoint
// every 20 steps. One server is killed with SIGKILL at five moments, one
// per life of the cluster:
//   1. right after a checkpoint was committed;
//   2. while a checkpoint is being written (--test_hold_checkpoint_step
//      stops shard 0's write half-way; the kill leaves an incomplete
//      checkpoint directory behind);
//   3. right after the workers resumed, before their next checkpoint;
//   4. between two checkpoints, training in full swing;
//   5. right after the checkpoint at an epoch's end (the resume position is
//      "the whole epoch consumed").
// After each kill: the workers must exit with status 3 (a server lost), not
// hang; every server is restarted with --restore_from=latest and checked
// before the workers come back: the checkpoint restored is the newest
// complete one (never the interrupted one), and every row pulled through
// PsClient equals, bit for bit, that checkpoint's row as the checkpoint
// library reads it. The sixth life trains to the end; its eval AUC must be
// within 0.005 of an uninterrupted run with the same seed. The figures
// (AUCs, pause per checkpoint) are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/layout.h"
#include "tests/checkpoint/crash_cluster.h"

namespace ps::testing::crash {
namespace {

std::string Complete(uint64_t step) {
  return ck::CheckpointDirName(step) + " complete";
}

TEST_F(CheckpointCrashTest, KillNineAtFiveMomentsThenResume) {
  const int slow = SlowdownFactor();
  const int long_wait = 60000 * slow;
  std::vector<double> pauses;

  // The uninterrupted run.
  double reference_auc;
  {
    auto life = StartServers("reference", dir_->path() + "/ckpt-ref", false);
    ASSERT_NE(life, nullptr);
    StartWorkers(life.get());
    for (uint32_t w = 0; w < kWorkers; ++w) {
      ASSERT_EQ(life->workers[w]->Wait(long_wait), 0)
          << life->workers[w]->Log();
    }
    reference_auc =
        JsonNumber(ReadFile(life->dir + "/metrics-0.json"), "eval_auc");
    for (double p : Pauses(life->workers[0]->Log())) pauses.push_back(p);
    for (auto& s : life->servers) EXPECT_EQ(s->Stop(10000 * slow).value(), 0);
  }
  ASSERT_FALSE(std::isnan(reference_auc));

  const std::string ckpt = dir_->path() + "/ckpt";
  // Life 1: killed right after the checkpoint at step 2 * Every().
  {
    auto life = StartServers("life1", ckpt, false);
    ASSERT_NE(life, nullptr);
    StartWorkers(life.get());
    ASSERT_TRUE(WaitFor(
        [&] {
          return life->ServerLog(0).find(Complete(2 * Every())) !=
                 std::string::npos;
        },
        long_wait))
        << life->ServerLog(0);
    Crash(life.get(), 1);
  }
  // Life 2: killed while shard 0 writes the next checkpoint.
  uint64_t restored;
  uint64_t held;
  {
    auto probe = ck::ListCheckpoints(ckpt).value();
    held = 0;
    for (const auto& c : probe) {
      if (c.complete) held = c.step + Every();
    }
    auto life = StartServers("life2", ckpt, true, held);
    ASSERT_NE(life, nullptr);
    restored = CheckRestored(life.get(), ckpt);
    EXPECT_EQ(restored + Every(), held);
    StartWorkers(life.get());
    ASSERT_TRUE(WaitFor(
        [&] {
          return life->ServerLog(0).find("test hold: checkpoint step " +
                                         std::to_string(held)) !=
                 std::string::npos;
        },
        long_wait))
        << life->ServerLog(0);
    for (uint32_t w = 0; w < kWorkers; ++w) {
      EXPECT_NE(life->workers[w]->Log().find("resumed from step " +
                                             std::to_string(restored)),
                std::string::npos)
          << life->workers[w]->Log();
    }
    Crash(life.get(), 0);
    // The interrupted checkpoint: on disk, half-written, not complete.
    auto list = ck::ListCheckpoints(ckpt).value();
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const auto& c) { return c.step == held; });
    ASSERT_NE(it, list.end()) << "no directory of the interrupted checkpoint";
    EXPECT_FALSE(it->complete);
    EXPECT_TRUE(std::filesystem::exists(it->path + "/shard-0.sst-tmp"));
  }
  // Life 3: the interrupted checkpoint is not used; killed right after the
  // workers resumed.
  {
    auto life = StartServers("life3", ckpt, true);
    ASSERT_NE(life, nullptr);
    EXPECT_EQ(CheckRestored(life.get(), ckpt), restored);
    StartWorkers(life.get());
    ASSERT_TRUE(WaitFor(
        [&] {
          for (auto& w : life->workers) {
            if (w->Log().find("resumed from step") == std::string::npos)
              return false;
          }
          return true;
        },
        long_wait));
    Crash(life.get(), 1);
  }
  // Life 4: killed between two checkpoints.
  {
    auto life = StartServers("life4", ckpt, true);
    ASSERT_NE(life, nullptr);
    restored = CheckRestored(life.get(), ckpt);
    StartWorkers(life.get());
    ASSERT_TRUE(WaitFor(
        [&] {
          return life->ServerLog(0).find(Complete(restored + Every())) !=
                 std::string::npos;
        },
        long_wait))
        << life->ServerLog(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    Crash(life.get(), 0);
  }
  // Life 5: killed right after the checkpoint at the end of epoch 2.
  const uint64_t steps_per_epoch = StepsPerEpoch();
  {
    auto life = StartServers("life5", ckpt, true);
    ASSERT_NE(life, nullptr);
    restored = CheckRestored(life.get(), ckpt);
    ASSERT_LT(restored, 2 * steps_per_epoch);
    StartWorkers(life.get());
    ASSERT_TRUE(WaitFor(
        [&] {
          return life->ServerLog(0).find(Complete(2 * steps_per_epoch)) !=
                 std::string::npos;
        },
        long_wait))
        << life->ServerLog(0);
    Crash(life.get(), 1);
  }
  // Life 6: resumes at the epoch boundary and trains to the end.
  double resumed_auc;
  {
    auto life = StartServers("life6", ckpt, true);
    ASSERT_NE(life, nullptr);
    restored = CheckRestored(life.get(), ckpt);
    EXPECT_GE(restored, 2 * steps_per_epoch);
    StartWorkers(life.get());
    for (uint32_t w = 0; w < kWorkers; ++w) {
      ASSERT_EQ(life->workers[w]->Wait(long_wait), 0)
          << life->workers[w]->Log();
    }
    resumed_auc =
        JsonNumber(ReadFile(life->dir + "/metrics-0.json"), "eval_auc");
    for (auto& s : life->servers) EXPECT_EQ(s->Stop(10000 * slow).value(), 0);
  }
  std::sort(pauses.begin(), pauses.end());
  double mean = 0;
  for (double p : pauses) mean += p / std::max<size_t>(pauses.size(), 1);
  std::printf(
      "crash test: eval AUC uninterrupted %.5f, after 5 kills %.5f "
      "(diff %.5f); checkpoint pause (worker 0, uninterrupted run, %zu "
      "checkpoints): mean %.1f ms, max %.1f ms\n",
      reference_auc, resumed_auc, resumed_auc - reference_auc, pauses.size(),
      mean, pauses.empty() ? 0.0 : pauses.back());
  EXPECT_NEAR(resumed_auc, reference_auc, 0.005);
}

}  // namespace
}  // namespace ps::testing::crash
