// Checkpoints when a shard dies, a cut is forged, a part is damaged or the
// disk is full: real ps_server processes on 127.0.0.1, with this test as
// their only worker (PsClient + CheckpointSync in-process).
//
// - A shard killed mid-write: shard 0 abandons the checkpoint within
//   --timeout_ms (deletes it, logs why), the worker hears of it at the next
//   checkpoint instead of waiting, and SIGTERM stops shard 0 within 5 s.
// - A cut without worker 0's hello, or at step 2^64-1, is refused.
// - One shard's part of the newest checkpoint damaged: with
//   --restore_fallback every shard restores the previous one; without it,
//   no shard starts.
// - A full disk (a small tmpfs, when this runs as root): a failed
//   checkpoint leaves nothing behind, retention frees space for the next,
//   and the workers are told how many failed in a row.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/layout.h"
#include "client/checkpoint_sync.h"
#include "client/ps_client.h"
#include "protocol/control_channel.h"
#include "tests/ps/server_process.h"

namespace ps::testing {
namespace {

namespace ck = ps::checkpoint;
using Clock = std::chrono::steady_clock;

constexpr int kTimeoutMs = 1000;  // the servers' --timeout_ms

// One HASHED table of `capacity` rows x `dim` floats. Adagrad, not SGD:
// SGD applies without a lock, and the order of a cut with the apply threads
// (through the worker and shared memory) is one TSan cannot see
// (server/checkpoint/checkpointer.cc, Copy).
std::string Tables(uint32_t dim, uint64_t capacity) {
  return "table { id: 1 name: \"emb\" kind: HASHED dim: " +
         std::to_string(dim) + " capacity: " + std::to_string(capacity) +
         " push_value_type: FP32 optimizer { name: \"adagrad\" "
         "learning_rate: 0.05 initial_accumulator: 0.1 } initializer { name: "
         "\"uniform\" scale: 0.1 seed: 3 } }\n";
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Polls `done` every 20 ms for up to `seconds`.
template <typename F>
bool Eventually(F done, double seconds) {
  const auto start = Clock::now();
  while (!done()) {
    if (SecondsSince(start) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class CheckpointFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir::Create("ckpt_faults").value();
    tables_ = dir_->WriteFile("emb.tables", Tables(4, 4096)).value();
    ckpt_ = dir_->path() + "/ckpt";
  }

  // Launches `n` servers together (a restore waits for all of them) and
  // waits for those expected to come up.
  std::vector<std::unique_ptr<ServerProcess>> Launch(
      uint32_t n, const std::vector<std::string>& flags,
      const std::vector<std::string>& shard1_flags = {}) {
    // Each launch logs into a folder of its own.
    const std::string logs = dir_->path() + "/life-" + std::to_string(++lives_);
    std::filesystem::create_directories(logs);
    std::vector<std::unique_ptr<ServerProcess>> servers;
    for (uint32_t k = 0; k < n; ++k) {
      ServerOptions o;
      o.shard_id = k;
      o.num_shards = n;
      o.num_workers = 1;
      o.tables_path = tables_;
      o.consistency = proto::CONSISTENCY_BSP;
      o.extra_flags = {
          "--checkpoint_dir=" + ckpt_, "--checkpoint_keep=3",
          "--timeout_ms=" + std::to_string(kTimeoutMs * SlowdownFactor()),
          "--restore_wait_secs=" + std::to_string(20 * SlowdownFactor())};
      for (const auto& f : flags) o.extra_flags.push_back(f);
      if (k == 1) {
        for (const auto& f : shard1_flags) o.extra_flags.push_back(f);
      }
      auto s = ServerProcess::Launch(PS_SERVER_BIN, o, logs);
      EXPECT_TRUE(s.ok()) << s.status();
      servers.push_back(std::move(*s));
    }
    return servers;
  }

  static bool AllReady(std::vector<std::unique_ptr<ServerProcess>>& servers) {
    for (auto& s : servers) {
      Status ready = s->WaitReady();
      EXPECT_TRUE(ready.ok()) << ready;
      if (!ready.ok()) return false;
    }
    return true;
  }

  static std::unique_ptr<worker::PsClient> Connect(
      std::vector<std::unique_ptr<ServerProcess>>& servers) {
    worker::PsClient::Options o;
    for (auto& s : servers) o.servers.push_back(s->address());
    o.xfer.peer_timeout_ms = 5000 * SlowdownFactor();
    auto c = worker::PsClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // One step: a push of a few keys, then the clock.
  static void Step(worker::PsClient& client, uint64_t seed) {
    const uint32_t dim = client.table(1)->dim();
    std::vector<uint64_t> keys;
    std::vector<float> grads;
    for (uint64_t i = 0; i < 64; ++i) {
      keys.push_back(seed * 1000 + i);
      for (uint32_t j = 0; j < dim; ++j) grads.push_back(0.01f * (j + 1));
    }
    ASSERT_TRUE(client.Push(1, keys, grads).ok());
    ASSERT_TRUE(client.Clock().ok());
  }

  // Servers up, and this test connected as their only worker.
  struct Cluster {
    std::vector<std::unique_ptr<ServerProcess>> servers;
    std::unique_ptr<worker::PsClient> client;
    std::unique_ptr<worker::CheckpointSync> sync;
    bool ok() const { return client != nullptr && sync != nullptr; }
  };
  Cluster Working(uint32_t n, const std::vector<std::string>& flags,
                  const std::vector<std::string>& shard1_flags = {}) {
    Cluster c;
    c.servers = Launch(n, flags, shard1_flags);
    if (!AllReady(c.servers)) return c;
    c.client = Connect(c.servers);
    if (c.client == nullptr) return c;
    auto sync = worker::CheckpointSync::Create(c.client.get());
    EXPECT_TRUE(sync.ok()) << sync.status();
    if (sync.ok()) c.sync = std::move(*sync);
    return c;
  }
  // The worker leaves, then every server stops (SIGTERM) and exits 0.
  static void StopAll(Cluster& c) {
    c.sync.reset();
    c.client.reset();
    for (auto& s : c.servers) {
      auto code = s->Stop(10000 * SlowdownFactor());
      EXPECT_TRUE(code.ok() && *code == 0) << s->ReadLog();
    }
    c.servers.clear();
  }
  // A step, then the checkpoint at it.
  static StatusOr<worker::CheckpointResult> StepAndCheckpoint(Cluster& c,
                                                              uint64_t step) {
    Step(*c.client, step);
    return c.sync->Checkpoint(step, 0, step * 100);
  }

  bool Complete(uint64_t step) const {
    return ck::ReadManifest(ck::JoinPath(ckpt_, ck::CheckpointDirName(step)))
        .ok();
  }
  bool Exists(uint64_t step) const {
    return std::filesystem::exists(
        ck::JoinPath(ckpt_, ck::CheckpointDirName(step)));
  }

  std::unique_ptr<ScratchDir> dir_;
  std::string tables_;
  std::string ckpt_;
  int lives_ = 0;
};

void Kill9(ServerProcess& s) {
  kill(s.pid(), SIGKILL);
  (void)s.Stop(10000);  // reaps it
}

// Whether the server's log comes to say `text` within 10 s (x slowdown).
bool WaitForLog(ServerProcess& s, const std::string& text) {
  return Eventually([&] { return s.ReadLog().find(text) != std::string::npos; },
                    10 * SlowdownFactor());
}

TEST_F(CheckpointFaultsTest, AShardKilledMidWriteIsGivenUpInTime) {
  Cluster c = Working(2, {"--checkpoint_on_exit=true"},
                      {"--test_hold_checkpoint_step=2"});
  ASSERT_TRUE(c.ok());
  auto& servers = c.servers;
  ASSERT_TRUE(StepAndCheckpoint(c, 1).ok());
  ASSERT_TRUE(Eventually([&] { return Complete(1); }, 10 * SlowdownFactor()));
  ASSERT_TRUE(StepAndCheckpoint(c, 2).ok());
  ASSERT_TRUE(WaitForLog(*servers[1], "test hold: checkpoint step 2"));

  Kill9(*servers[1]);
  const auto killed = Clock::now();
  ASSERT_TRUE(WaitForLog(*servers[0], "checkpoint step 2 abandoned"))
      << servers[0]->ReadLog();
  const double gave_up = SecondsSince(killed);
  // Before: shard 0 waited 600 s for the dead shard's part.
  EXPECT_LT(gave_up, (kTimeoutMs / 1000.0 + 1.0) * SlowdownFactor());
  EXPECT_FALSE(Exists(2)) << "the abandoned checkpoint stayed behind";
  std::printf("shard 0 gave up the dead shard's part after %.2f s\n", gave_up);

  // Every worker hears how the previous checkpoint ended at the next one.
  proto::ControlRequest pos;
  pos.mutable_checkpoint()->set_action(proto::CheckpointRequest::POSITION);
  pos.mutable_checkpoint()->set_step(3);
  const auto asked = Clock::now();
  auto reply = c.client->CallServer(0, pos);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_LT(SecondsSince(asked), 2.0 * SlowdownFactor());
  const proto::CheckpointReply& r = reply->checkpoint();
  EXPECT_EQ(r.previous_step(), 2u);
  EXPECT_TRUE(r.previous_failed());
  EXPECT_NE(r.previous_error().find("shard 1"), std::string::npos)
      << r.previous_error();
  EXPECT_EQ(r.consecutive_failures(), 1u);
  EXPECT_EQ(r.newest_complete_step(), 1u);

  // The whole next checkpoint fails fast (shard 1 is gone), not after 150 s.
  const auto started = Clock::now();
  EXPECT_FALSE(c.sync->Checkpoint(4, 0, 400).ok());
  EXPECT_LT(SecondsSince(started), 5.0 * SlowdownFactor());
  c.client.reset();

  // SIGTERM: within 5 s, although its final checkpoint cannot complete.
  const auto term = Clock::now();
  auto code = servers[0]->Stop(20000 * SlowdownFactor());
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << servers[0]->ReadLog();
  EXPECT_LT(SecondsSince(term), 5.0 * SlowdownFactor());
  EXPECT_TRUE(Complete(1));
}

TEST_F(CheckpointFaultsTest, AShardThatStopsAnsweringIsGivenUpAtTheTimeout) {
  Cluster c = Working(2, {"--checkpoint_on_exit=false"},
                      {"--test_hold_checkpoint_step=1"});
  ASSERT_TRUE(c.ok());
  auto& servers = c.servers;
  ASSERT_TRUE(StepAndCheckpoint(c, 1).ok());
  ASSERT_TRUE(WaitForLog(*servers[1], "test hold: checkpoint step 1"));
  // Alive (its port accepts) but silent: only the timeout tells.
  kill(servers[1]->pid(), SIGSTOP);
  const auto stopped = Clock::now();
  const bool abandoned = WaitForLog(*servers[0], "checkpoint step 1 abandoned");
  const double gave_up = SecondsSince(stopped);
  Kill9(*servers[1]);
  ASSERT_TRUE(abandoned) << servers[0]->ReadLog();
  const double timeout_s = kTimeoutMs * SlowdownFactor() / 1000.0;
  EXPECT_GT(gave_up, 0.8 * timeout_s);
  EXPECT_LT(gave_up, timeout_s + 1.5 * SlowdownFactor());
  std::printf(
      "shard 0 gave up a silent shard's part after %.2f s "
      "(--timeout_ms=%d)\n",
      gave_up, kTimeoutMs * SlowdownFactor());
  EXPECT_FALSE(Exists(1));
}

TEST_F(CheckpointFaultsTest, StoppingEveryShardCommitsTheFinalCheckpoint) {
  {
    Cluster c = Working(2, {"--checkpoint_on_exit=true"});
    ASSERT_TRUE(c.ok());
    auto& servers = c.servers;
    ASSERT_TRUE(StepAndCheckpoint(c, 1).ok());
    Step(*c.client, 2);
    c.client.reset();
    // Both at once, as a cluster stop does: shard 0 must still hear from
    // shard 1 about the final checkpoint (step 2).
    const auto term = Clock::now();
    for (auto& s : servers) kill(s->pid(), SIGTERM);
    for (auto& s : servers) {
      // One signal only (a second one gives up the final checkpoint).
      std::optional<int> code;
      EXPECT_TRUE(Eventually([&] { return (code = s->Exited()).has_value(); },
                             20 * SlowdownFactor()));
      EXPECT_EQ(code, std::optional<int>(0)) << s->ReadLog();
    }
    EXPECT_LT(SecondsSince(term), 5.0 * SlowdownFactor());
    EXPECT_TRUE(Complete(2)) << servers[0]->ReadLog();
  }
  // A restore waits for the other shards, but a SIGTERM ends the wait.
  auto servers = Launch(2, {"--restore_from=latest"});
  Kill9(*servers[1]);
  ASSERT_TRUE(WaitForLog(*servers[0], "waiting for the other shards"))
      << servers[0]->ReadLog();
  const auto term = Clock::now();
  auto code = servers[0]->Stop(20000 * SlowdownFactor());
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << servers[0]->ReadLog();
  EXPECT_LT(SecondsSince(term), 5.0 * SlowdownFactor());
}

TEST_F(CheckpointFaultsTest, ForgedCutsAreRefused) {
  Cluster c = Working(2, {"--checkpoint_on_exit=false"});
  ASSERT_TRUE(c.ok());
  proto::ControlRequest cut;
  cut.mutable_checkpoint()->set_action(proto::CheckpointRequest::CUT);
  cut.mutable_checkpoint()->set_step(std::numeric_limits<uint64_t>::max());
  // Anonymous: no hello on this connection.
  auto anonymous = protocol::ControlClient::Connect(
      c.servers[0]->address(), {.timeout_ms = 5000, .secret = {}});
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  auto refused = anonymous->Call(cut);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("worker 0"), std::string::npos)
      << refused.status();
  // Worker 0 itself, at a step that would wrap the final checkpoint's.
  const auto start = Clock::now();
  refused = c.client->CallServer(0, cut);
  ASSERT_FALSE(refused.ok());
  EXPECT_LT(SecondsSince(start), 1.0 * SlowdownFactor());
  // The real schedule goes on.
  ASSERT_TRUE(StepAndCheckpoint(c, 1).ok());
  EXPECT_TRUE(Eventually([&] { return Complete(1); }, 10 * SlowdownFactor()));
}

// Flips bytes in the middle of every SST file of shard `k`'s part.
void Damage(const std::string& checkpoint, uint32_t k) {
  for (const auto& e : std::filesystem::directory_iterator(
           ck::JoinPath(checkpoint, ck::ShardDirName(k)))) {
    if (e.path().extension() != ".sst") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(e.path());
    f.seekp(static_cast<std::streamoff>(size / 2));
    const char junk[16] = {'d', 'a', 'm', 'a', 'g', 'e', 'd', '!',
                           'd', 'a', 'm', 'a', 'g', 'e', 'd', '!'};
    f.write(junk, sizeof(junk));
  }
}

TEST_F(CheckpointFaultsTest, AllShardsRestoreOneCheckpointOrNoneStarts) {
  {
    Cluster c = Working(2, {"--checkpoint_on_exit=false"});
    ASSERT_TRUE(c.ok());
    for (uint64_t step = 1; step <= 2; ++step) {
      ASSERT_TRUE(StepAndCheckpoint(c, step).ok());
      ASSERT_TRUE(
          Eventually([&] { return Complete(step); }, 10 * SlowdownFactor()));
    }
    StopAll(c);
  }
  Damage(ck::JoinPath(ckpt_, ck::CheckpointDirName(2)), 1);

  {
    // Before: shard 0 restored step 2, shard 1 fell back to step 1, and
    // both started.
    auto servers = Launch(2, {"--restore_from=latest", "--restore_fallback"});
    ASSERT_TRUE(AllReady(servers));
    for (uint32_t k = 0; k < 2; ++k) {
      const std::string log = servers[k]->ReadLog();
      EXPECT_NE(
          log.find("from " + ck::JoinPath(ckpt_, ck::CheckpointDirName(1)) +
                   " (step 1"),
          std::string::npos)
          << "shard " << k << ":\n"
          << log;
    }
    for (auto& s : servers)
      EXPECT_EQ(s->Stop(10000 * SlowdownFactor()).value(), 0);
  }
  {
    // Without fallback neither shard starts, and shard 0 says why.
    auto servers = Launch(2, {"--restore_from=latest"});
    for (auto& s : servers) EXPECT_FALSE(s->WaitReady().ok());
    const std::string log = servers[0]->ReadLog();
    EXPECT_NE(log.find("shard 1"), std::string::npos) << log;
  }
}

// A tmpfs of `megabytes` at `path`, unmounted on destruction; not mounted
// (ok() false) without the privilege.
class SmallDisk {
 public:
  SmallDisk(const std::string& path, int megabytes) : path_(path) {
    std::filesystem::create_directories(path);
    const std::string options = "size=" + std::to_string(megabytes) + "m";
    mounted_ = mount("tmpfs", path.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  }
  bool ok() const { return mounted_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

TEST_F(CheckpointFaultsTest, AFullDiskFreesSpaceAndReportsFailures) {
  SmallDisk disk(ckpt_, 7);
  if (!disk.ok()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  // 40,000 rows x 8 floats and their accumulators: about 2.6 MB per (full)
  // checkpoint, so two fit in 7 MB and a third only once retention made
  // room.
  tables_ = dir_->WriteFile("big.tables", Tables(8, 40000)).value();
  Cluster c = Working(1, {"--checkpoint_full_every=1", "--checkpoint_keep=3",
                          "--checkpoint_on_exit=false"});
  ASSERT_TRUE(c.ok());
  for (uint64_t step = 1; step <= 4; ++step) {
    auto r = StepAndCheckpoint(c, step);
    ASSERT_TRUE(r.ok()) << r.status();
    if (step > 1) {
      // Each checkpoint ended well: retention made room when it had to.
      EXPECT_FALSE(r->previous_failed) << r->previous_error;
    }
  }
  EXPECT_TRUE(Eventually([&] { return Complete(4); }, 10 * SlowdownFactor()))
      << c.servers[0]->ReadLog();
  EXPECT_NE(c.servers[0]->ReadLog().find("to make room"), std::string::npos);

  // A table that cannot fit at all: every checkpoint fails, nothing stays
  // behind, and the count of failures in a row reaches the workers.
  StopAll(c);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ckpt_, ec)) {
    std::filesystem::remove_all(e.path(), ec);
  }
  // 23 MB with the accumulators: never fits.
  tables_ = dir_->WriteFile("huge.tables", Tables(32, 90000)).value();
  c = Working(1, {"--checkpoint_full_every=1", "--checkpoint_on_exit=false"});
  ASSERT_TRUE(c.ok());
  uint32_t failures = 0;
  for (uint64_t step = 1; step <= 3; ++step) {
    auto r = StepAndCheckpoint(c, step);
    ASSERT_TRUE(r.ok()) << r.status();
    if (step > 1) {
      EXPECT_TRUE(r->previous_failed);
      EXPECT_EQ(r->consecutive_failures, step - 1);
      EXPECT_EQ(r->newest_complete_step, 0u);
      failures = r->consecutive_failures;
    }
  }
  EXPECT_EQ(failures, 2u);
  StopAll(c);
  uint64_t left = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(ckpt_, ec)) {
    if (e.is_regular_file() &&
        e.path().string().find("/servers/") == std::string::npos) {
      left += e.file_size();
    }
  }
  EXPECT_EQ(left, 0u) << "failed checkpoints left files behind";
}

}  // namespace
}  // namespace ps::testing
