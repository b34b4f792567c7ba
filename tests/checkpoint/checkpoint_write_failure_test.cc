// A shard write that fails (a full disk, a bad snapshot) returns the error
// and leaves nothing of the shard behind: no shard-<k>/, no .sst-tmp/, no
// .done or .done.tmp. Partial files would keep the space that the retry
// after FreeSpaceForCheckpoint needs.
//
// The full disk is RLIMIT_FSIZE with SIGXFSZ ignored: every write past the
// limit into a regular file fails with EFBIG, in every thread, at whatever
// point of the write it comes, as ENOSPC does on a full disk; and it needs
// no mount (a small tmpfs would need root and a cleanup in every path).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Model;
using testing::TempDir;

// Caps the size of files this process writes while it lives; restores the
// limit and SIGXFSZ's disposition when it dies.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    if (::getrlimit(RLIMIT_FSIZE, &old_) != 0) {
      why_not_ = std::string("getrlimit: ") + std::strerror(errno);
      return;
    }
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    if (::sigaction(SIGXFSZ, &ignore, &old_action_) != 0) {
      why_not_ = std::string("sigaction(SIGXFSZ): ") + std::strerror(errno);
      return;
    }
    rlimit limit = old_;
    limit.rlim_cur = std::min(bytes, old_.rlim_max);
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      why_not_ =
          std::string("setrlimit(RLIMIT_FSIZE): ") + std::strerror(errno);
      ::sigaction(SIGXFSZ, &old_action_, nullptr);
      return;
    }
    active_ = true;
  }
  ~FileSizeLimit() {
    if (!active_) return;
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::sigaction(SIGXFSZ, &old_action_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  // Empty when the limit is in force, else why not.
  const std::string& why_not() const { return why_not_; }

 private:
  bool active_ = false;
  std::string why_not_;
  rlimit old_{};
  struct sigaction old_action_ {};
};

// Whatever of shard `shard` is in `checkpoint_dir`.
std::vector<std::string> ShardLeftovers(const std::string& checkpoint_dir,
                                        uint32_t shard) {
  std::vector<std::string> found;
  std::error_code ec;
  const std::string prefix = ShardDirName(shard);
  for (const auto& e :
       std::filesystem::directory_iterator(checkpoint_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == prefix || name.rfind(prefix + ".", 0) == 0) {
      found.push_back(name);
    }
  }
  return found;
}

// Where the disk fills up: from the start (the SST files do not fit), or
// once the SST files are written (the database's own files do not fit, so
// opening it or ingesting into it fails with shard-<k>/ half made).
struct FullDiskCase {
  const char* name;
  rlim_t limit;
  bool after_files;
};

void PrintTo(const FullDiskCase& c, std::ostream* os) { *os << c.name; }

class CheckpointWriteFailure : public ::testing::TestWithParam<FullDiskCase> {};

TEST_P(CheckpointWriteFailure, FullDiskLeavesNothingBehind) {
  const FullDiskCase& c = GetParam();
  TempDir dir;
  const std::string ckpt = JoinPath(dir.path(), CheckpointDirName(7));
  Model model;
  model.hashed_capacity = 4000;
  model.dense_capacity = 11;
  model.exact_keys = 300;
  // Shard 1 of 2 is there already: a failure of shard 0 must not touch it.
  ASSERT_TRUE(WriteShard(ckpt, model.Snapshot(1, 2, 7), {}).ok());
  const ShardSnapshot snapshot = model.Snapshot(0, 2, 7);
  ShardWriteOptions options;
  options.target_file_bytes = 64 << 10;  // several SST files
  StatusOr<proto::ShardEntry> entry = Internal("not run");
  {
    std::optional<FileSizeLimit> full_disk;
    if (c.after_files) {
      options.after_files = [&] { full_disk.emplace(c.limit); };
    } else {
      full_disk.emplace(c.limit);
    }
    entry = WriteShard(ckpt, snapshot, options);
    ASSERT_TRUE(full_disk.has_value());
    if (!full_disk->why_not().empty()) {
      GTEST_SKIP() << "cannot limit file sizes here (" << full_disk->why_not()
                   << "): no way to make writes fail without a mount";
    }
  }
  options.after_files = nullptr;
  ASSERT_FALSE(entry.ok()) << "the " << c.limit << "-byte limit did not bite";
  EXPECT_TRUE(entry.status().Is(StatusCode::kIOError)) << entry.status();
  EXPECT_NE(entry.status().message().find(ckpt), std::string::npos)
      << entry.status();
  std::cerr << "  (" << c.name << ": " << entry.status() << ")\n";
  EXPECT_EQ(ShardLeftovers(ckpt, 0), std::vector<std::string>{});
  EXPECT_EQ(ShardLeftovers(ckpt, 1),
            (std::vector<std::string>{"shard-1", "shard-1.done"}));

  // With room again the retry writes it, and the checkpoint restores.
  ASSERT_TRUE(WriteShard(ckpt, snapshot, options).ok());
  CommitRequest commit;
  commit.checkpoint_dir = ckpt;
  commit.step = 7;
  commit.num_shards = 2;
  commit.tables = model.Specs();
  ASSERT_TRUE(CommitCheckpoint(commit).ok());
  for (uint32_t k = 0; k < 2; ++k) {
    auto t = model.MakeTarget(k, 2);
    auto r = RestoreShard(ckpt, &t.target);
    ASSERT_TRUE(r.ok()) << r.status();
    model.ExpectRestored(t.target);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Points, CheckpointWriteFailure,
    ::testing::Values(FullDiskCase{"sst_files", 16 << 10, false},
                      FullDiskCase{"database", 64, true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(CheckpointWriteFailureBadInput, BadSnapshotLeavesNothingBehind) {
  TempDir dir;
  const std::string ckpt = JoinPath(dir.path(), CheckpointDirName(3));
  Model model;
  model.hashed_capacity = 100;
  model.exact_keys = 10;
  ShardSnapshot snapshot = model.Snapshot(0, 1, 3);
  snapshot.tables[0].values.pop_back();  // not whole rows
  auto entry = WriteShard(ckpt, snapshot, {});
  ASSERT_TRUE(entry.status().Is(StatusCode::kInvalidArgument))
      << entry.status();
  EXPECT_EQ(ShardLeftovers(ckpt, 0), std::vector<std::string>{});
}

}  // namespace
}  // namespace ps::checkpoint
