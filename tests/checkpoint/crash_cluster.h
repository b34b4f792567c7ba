// The crash test's cluster (tests/checkpoint/checkpoint_crash_test.cc): LR
// on generated rows with 2 ps_server and 2 ps_worker processes, BSP, a
// checkpoint every Every() steps, started as one "life" at a time; a crash
// (SIGKILL of a server, every worker must exit with status 3) and the check
// that restarted servers hold exactly the newest complete checkpoint, bit
// for bit, as the checkpoint library reads it.
//
// Needs PS_SERVER_BIN, PS_WORKER_BIN and PS_DATAGEN_BIN defined (the test's
// CMake target does). Thread-safety: test code, one thread.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "client/ps_client.h"
#include "protocol/shard_map.h"
#include "protocol/table_config.h"
#include "tests/ps/server_process.h"

namespace ps::testing::crash {

namespace ck = ps::checkpoint;

constexpr uint32_t kServers = 2;
constexpr uint32_t kWorkers = 2;
constexpr uint32_t kBatch = 500;  // examples per step
constexpr uint32_t kEpochs = 3;   //
constexpr uint64_t kCapacity = 1 << 16;

// 60 steps per epoch and a checkpoint every 20 (60k training rows); under
// sanitizers PS_TEST_SCALE shrinks the data (18 steps per epoch, every 6
// with 0.3): the moments stay the same.
inline uint64_t StepsPerEpoch() {
  return std::max<uint64_t>(
      9, static_cast<uint64_t>(20 * ps::testing::TestScale() + 0.5) * 3);
}
inline uint64_t Every() { return StepsPerEpoch() / 3; }
inline uint64_t Rows() { return StepsPerEpoch() * kWorkers * kBatch; }
constexpr int kExitServerLost = 3;  // ps_worker's status for a lost server

inline constexpr char kTables[] = R"(
table {
  id: 1
  name: "emb"
  kind: HASHED
  dim: 1
  capacity: 65536
  push_value_type: FP32
  optimizer { name: "adagrad" learning_rate: 0.05 initial_accumulator: 0.1 }
  initializer { name: "zeros" }
}
)";

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One ps_worker (or ps_datagen) process: fork + exec, output to a log file.
class Program {
 public:
  Program(const std::vector<std::string>& argv, const std::string& log)
      : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> args;
      for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Program() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The exit code (128 + signal), or nullopt after timeout_ms.
  std::optional<int> Wait(int timeout_ms) {
    if (pid_ <= 0) return code_;
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(timeout_ms);
    while (true) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        code_ =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return code_;
      }
      if (std::chrono::steady_clock::now() > end) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::string Log() const { return ReadFile(log_); }

 private:
  pid_t pid_ = -1;
  std::optional<int> code_;
  std::string log_;
};

// Polls until `pred` holds; false after timeout_ms.
template <typename Pred>
bool WaitFor(Pred pred, int timeout_ms) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// SIGKILL, then reap (Stop). Only a live child: pid() is -1 once reaped, and
// kill(-1) would signal every process we may signal.
inline void Kill9(ServerProcess& s) {
  if (s.pid() <= 0) return;
  kill(s.pid(), SIGKILL);
  (void)s.Stop(10000);  // reaps it
}

class CheckpointCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir::Create("ckpt_crash").value();
    tables_ = dir_->WriteFile("lr.tables", kTables).value();
    train_ = dir_->path() + "/train.tsv";
    eval_ = dir_->path() + "/eval.tsv";
    Program gen({PS_DATAGEN_BIN, "--model=lr",
                 "--rows=" + std::to_string(Rows()), "--eval_rows=20000",
                 "--seed=7", "--output=" + train_, "--eval_output=" + eval_},
                dir_->path() + "/datagen.log");
    ASSERT_EQ(gen.Wait(60000 * SlowdownFactor()), 0) << gen.Log();
  }

  // A life of the cluster: its servers, its workers, its log folder.
  struct Life {
    std::string dir;
    std::vector<std::unique_ptr<ServerProcess>> servers;
    std::vector<std::unique_ptr<Program>> workers;
    std::string ServerLog(uint32_t k) const { return servers[k]->ReadLog(); }
  };

  std::unique_ptr<Life> StartServers(const std::string& name,
                                     const std::string& ckpt, bool restore,
                                     uint64_t hold_step_on_shard0 = 0) {
    auto life = std::make_unique<Life>();
    life->dir = dir_->path() + "/" + name;
    std::filesystem::create_directories(life->dir);
    for (uint32_t k = 0; k < kServers; ++k) {
      ServerOptions o;
      o.shard_id = k;
      o.num_shards = kServers;
      o.num_workers = kWorkers;
      o.tables_path = tables_;
      o.consistency = proto::CONSISTENCY_BSP;
      o.extra_flags = {"--checkpoint_dir=" + ckpt,
                       "--checkpoint_every_steps=" + std::to_string(Every()),
                       "--checkpoint_keep=3", "--checkpoint_full_every=3",
                       "--checkpoint_on_exit=false"};
      if (restore) o.extra_flags.push_back("--restore_from=latest");
      if (k == 0 && hold_step_on_shard0 != 0) {
        o.extra_flags.push_back("--test_hold_checkpoint_step=" +
                                std::to_string(hold_step_on_shard0));
      }
      // Launched together: a restoring shard waits for the others'
      // verdicts before it publishes its address.
      auto s = ServerProcess::Launch(PS_SERVER_BIN, o, life->dir);
      EXPECT_TRUE(s.ok()) << s.status();
      if (!s.ok()) return nullptr;
      life->servers.push_back(std::move(*s));
    }
    for (auto& s : life->servers) {
      ps::Status ready = s->WaitReady();
      EXPECT_TRUE(ready.ok()) << ready;
      if (!ready.ok()) return nullptr;
    }
    return life;
  }

  void StartWorkers(Life* life) {
    std::string servers;
    for (auto& s : life->servers) {
      servers += (servers.empty() ? "" : ",") + s->address();
    }
    for (uint32_t w = 0; w < kWorkers; ++w) {
      life->workers.push_back(std::make_unique<Program>(
          std::vector<std::string>{
              PS_WORKER_BIN, "--model=lr", "--train_data=" + train_,
              "--eval_data=" + eval_, "--epochs=" + std::to_string(kEpochs),
              "--batch_size=" + std::to_string(kBatch), "--threads=1",
              "--servers=" + servers, "--worker_id=" + std::to_string(w),
              "--num_workers=" + std::to_string(kWorkers),
              "--timeout_ms=" + std::to_string(3000 * SlowdownFactor()),
              "--progress_secs=0",
              "--metrics_json=" + life->dir + "/metrics-" + std::to_string(w) +
                  ".json"},
          life->dir + "/worker-" + std::to_string(w) + ".log"));
    }
  }

  // Kills server `victim` with SIGKILL; every worker must then exit with
  // kExitServerLost; the other servers are killed too.
  void Crash(Life* life, uint32_t victim) {
    Kill9(*life->servers[victim]);
    for (uint32_t w = 0; w < kWorkers; ++w) {
      std::optional<int> code =
          life->workers[w]->Wait(30000 * SlowdownFactor());
      EXPECT_EQ(code, kExitServerLost)
          << "worker " << w << " after server " << victim << " was killed:\n"
          << life->workers[w]->Log();
      EXPECT_NE(life->workers[w]->Log().find("recovery: restart every server"),
                std::string::npos);
    }
    for (auto& s : life->servers) Kill9(*s);
  }

  // The restarted servers hold exactly the newest complete checkpoint.
  // Returns its step.
  uint64_t CheckRestored(Life* life, const std::string& ckpt) {
    auto list = ck::ListCheckpoints(ckpt);
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return 0;
    const ck::CheckpointInfo* latest = nullptr;
    for (const auto& c : *list) {
      if (c.complete) latest = &c;
    }
    EXPECT_NE(latest, nullptr);
    if (latest == nullptr) return 0;
    for (uint32_t k = 0; k < kServers; ++k) {
      const std::string want = "from " + latest->path + " (step ";
      EXPECT_NE(life->ServerLog(k).find(want), std::string::npos)
          << "shard " << k << " did not restore " << latest->path << ":\n"
          << life->ServerLog(k);
    }
    // What the checkpoint library reads: the whole table on one shard.
    ck::RestoreTarget target;
    ck::TableTarget t;
    t.spec = ps::protocol::LoadTableConfig(tables_).value().table(0);
    t.state_arrays = 1;  // adagrad's accumulator
    t.rows = kCapacity;
    std::vector<float> want(kCapacity), accumulator(kCapacity);
    t.values = want.data();
    t.state[0] = accumulator.data();
    target.tables.push_back(t);
    auto r = ck::RestoreShard(latest->path, &target);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return 0;

    // One key per row, found by hashing keys until every row has one.
    const auto map = ps::protocol::ShardMap::ForTable(t.spec, 1);
    std::vector<uint64_t> key_of_row(kCapacity, UINT64_MAX);
    uint64_t missing = kCapacity;
    for (uint64_t key = 0; missing > 0; ++key) {
      uint64_t& k = key_of_row[map.GlobalRow(key)];
      if (k == UINT64_MAX) {
        k = key;
        --missing;
      }
    }
    std::vector<float> got(kCapacity);
    {
      ps::worker::PsClient::Options co;
      for (auto& s : life->servers) co.servers.push_back(s->address());
      co.worker_id = 0;
      co.num_workers = kWorkers;
      auto client = ps::worker::PsClient::Connect(co);
      EXPECT_TRUE(client.ok()) << client.status();
      if (!client.ok()) return 0;
      ps::Status s = (*client)->Pull(1, key_of_row, got);
      EXPECT_TRUE(s.ok()) << s;
    }
    uint64_t differ = 0, nonzero = 0;
    for (uint64_t row = 0; row < kCapacity; ++row) {
      differ += std::memcmp(&got[row], &want[row], sizeof(float)) != 0;
      nonzero += want[row] != 0;
    }
    EXPECT_EQ(differ, 0u) << "rows differing from " << latest->path;
    EXPECT_GT(nonzero, 100u) << "the checkpoint holds a trained table";
    return latest->manifest.step();
  }

  std::unique_ptr<ScratchDir> dir_;
  std::string tables_, train_, eval_;
};

inline double JsonNumber(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

// "paused training X ms" figures of a worker log.
inline std::vector<double> Pauses(const std::string& log) {
  std::vector<double> out;
  const std::string key = "paused training ";
  for (size_t at = log.find(key); at != std::string::npos;
       at = log.find(key, at + 1)) {
    out.push_back(std::strtod(log.c_str() + at + key.size(), nullptr));
  }
  return out;
}

}  // namespace ps::testing::crash
