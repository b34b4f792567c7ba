// Two servers that run out of disk at the same moment both call
// FreeSpaceForCheckpoint on the same root: each must succeed (a checkpoint
// the other deleted first, wholly or in part, is not an error) and together
// they must leave exactly the newest complete chain and the one in progress.
//
// Real processes, racing on real directories. Retention reads only the
// MANIFESTs, so the checkpoints here are a MANIFEST and filler files, no
// RocksDB: this binary starts no threads, and forking it is well-defined.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Steps;
using testing::TempDir;

// A checkpoint as retention sees it. Many files in it: the more entries,
// the longer two removers work on the same directory at once.
void FakeCheckpoint(const std::string& root, uint64_t step, proto::Kind kind,
                    uint64_t parent_step, bool complete) {
  const std::string dir = JoinPath(root, CheckpointDirName(step));
  for (int shard = 0; shard < 4; ++shard) {
    const std::string sub = JoinPath(dir, ShardDirName(shard));
    std::filesystem::create_directories(sub);
    for (int f = 0; f < 40; ++f) {
      const std::string path = JoinPath(sub, std::to_string(f) + ".sst");
      std::FILE* file = std::fopen(path.c_str(), "w");
      ASSERT_NE(file, nullptr) << path;
      std::fputs("x", file);
      std::fclose(file);
    }
  }
  if (!complete) return;
  proto::Manifest m;
  m.set_format_version(kFormatVersion);
  m.set_step(step);
  m.set_num_shards(1);
  m.set_kind(kind);
  if (kind == proto::INCREMENTAL) m.set_parent(CheckpointDirName(parent_step));
  proto::ShardEntry* e = m.add_shards();
  e->set_shard_id(0);
  e->set_path(ShardDirName(0));
  e->set_kind(kind);
  ASSERT_TRUE(WriteManifest(dir, m).ok());
}

// Children that are killed and reaped however the test ends.
class Children {
 public:
  ~Children() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  void Add(pid_t pid) { pids_.push_back(pid); }
  // Exit code of each child, -1 for one that did not exit in time or died
  // of a signal.
  std::vector<int> WaitAll(std::chrono::milliseconds timeout) {
    std::vector<int> codes;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (pid_t pid : pids_) {
      int status = 0;
      pid_t r = 0;
      while ((r = ::waitpid(pid, &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (r != pid) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        codes.push_back(-1);
        continue;
      }
      codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    pids_.clear();
    return codes;
  }

 private:
  std::vector<pid_t> pids_;
};

TEST(CheckpointFreeSpaceRace, TwoProcessesAtOnce) {
  // A few rounds: the removers must meet inside a directory at least once
  // (std::filesystem::remove_all failed with ENOENT in every round).
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir;
    // 1 full, 2 on it, 3 interrupted, 4 full, 5 on it, 6 full, 7 full,
    // 8 full, 9 on 8, 10 on 9, 11 in progress.
    FakeCheckpoint(dir.path(), 1, proto::FULL, 0, true);
    FakeCheckpoint(dir.path(), 2, proto::INCREMENTAL, 1, true);
    FakeCheckpoint(dir.path(), 3, proto::FULL, 0, false);
    FakeCheckpoint(dir.path(), 4, proto::FULL, 0, true);
    FakeCheckpoint(dir.path(), 5, proto::INCREMENTAL, 4, true);
    FakeCheckpoint(dir.path(), 6, proto::FULL, 0, true);
    FakeCheckpoint(dir.path(), 7, proto::FULL, 0, true);
    FakeCheckpoint(dir.path(), 8, proto::FULL, 0, true);
    FakeCheckpoint(dir.path(), 9, proto::INCREMENTAL, 8, true);
    FakeCheckpoint(dir.path(), 10, proto::INCREMENTAL, 9, true);
    FakeCheckpoint(dir.path(), 11, proto::INCREMENTAL, 10, false);
    ASSERT_FALSE(HasFatalFailure());

    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    Children children;
    for (int k = 0; k < 2; ++k) {
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        // Both start when the parent says so, to meet in the same
        // directories.
        ::close(go[1]);
        char c;
        if (::read(go[0], &c, 1) != 1) ::_exit(3);
        auto deleted = FreeSpaceForCheckpoint(dir.path());
        if (!deleted.ok()) {
          std::fprintf(stderr, "[child %d] %s\n", static_cast<int>(getpid()),
                       deleted.status().ToString().c_str());
          ::_exit(1);
        }
        ::_exit(0);
      }
      children.Add(pid);
    }
    ::close(go[0]);
    ASSERT_EQ(::write(go[1], "go", 2), 2);
    ::close(go[1]);
    EXPECT_EQ(children.WaitAll(std::chrono::seconds(20)),
              (std::vector<int>{0, 0}));
    EXPECT_EQ(Steps(dir.path()), (std::vector<uint64_t>{8, 9, 10, 11}));
    auto chain = ResolveChain(JoinPath(dir.path(), CheckpointDirName(10)));
    EXPECT_TRUE(chain.ok()) << chain.status();
  }
}

}  // namespace
}  // namespace ps::checkpoint
