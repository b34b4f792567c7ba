// A checkpoint is complete or ignored: an interrupted one (no MANIFEST, or
// only MANIFEST.tmp) is never taken as latest. Damage is detected and named:
// a flipped byte in a shard's data file or in the MANIFEST, or a data file
// cut short, is an error that names the file or shard, and restore falls
// back to the previous complete checkpoint only when told to.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Model;
using testing::TempDir;

void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x20));
}

std::string LargestSst(const std::string& dir) {
  std::string best;
  uint64_t size = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".sst" && e.file_size() > size) {
      size = e.file_size();
      best = e.path().string();
    }
  }
  return best;
}

class CheckpointIntegrity : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteCheckpoint(dir_.path(), old_model_, 10, 2).ok());
    new_model_.version = [](uint32_t, uint64_t) { return 3u; };
    ASSERT_TRUE(testing::WriteCheckpoint(dir_.path(), new_model_, 20, 2).ok());
  }
  std::string Ckpt(uint64_t step) const {
    return JoinPath(dir_.path(), CheckpointDirName(step));
  }
  TempDir dir_;
  Model old_model_, new_model_;
};

TEST_F(CheckpointIntegrity, InterruptedCheckpointIsNeverLatest) {
  // Shards written, MANIFEST never renamed into place (crash before commit).
  const std::string c30 = Ckpt(30);
  Model m30;
  m30.version = [](uint32_t, uint64_t) { return 9u; };
  for (uint32_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(WriteShard(c30, m30.Snapshot(k, 2, 30), {}).ok());
  }
  // A checkpoint that got as far as MANIFEST.tmp (a full, valid one even).
  const std::string c40 = Ckpt(40);
  std::filesystem::create_directories(c40);
  std::filesystem::copy_file(JoinPath(Ckpt(20), "MANIFEST"),
                             JoinPath(c40, "MANIFEST.tmp"));
  // Only a directory.
  std::filesystem::create_directories(Ckpt(50));

  auto list = ListCheckpoints(dir_.path());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 5u);
  int complete = 0;
  for (const auto& c : *list) complete += c.complete;
  EXPECT_EQ(complete, 2);

  for (uint32_t k = 0; k < 2; ++k) {
    auto t = new_model_.MakeTarget(k, 2);
    auto r = RestoreLatest(dir_.path(), {}, &t.target);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->manifest.step(), 20u);
    EXPECT_EQ(r->skipped.size(), 3u);
    new_model_.ExpectRestored(t.target);
  }
  // Asked for by path, an interrupted one is refused.
  auto t = new_model_.MakeTarget(0, 2);
  auto r = RestoreShard(c30, &t.target);
  ASSERT_TRUE(r.status().Is(StatusCode::kNotFound)) << r.status();
  EXPECT_NE(r.status().message().find("interrupted"), std::string::npos);
}

TEST_F(CheckpointIntegrity, FlippedDataByteIsNamedAndFallbackIsOptIn) {
  const std::string shard_dir = JoinPath(Ckpt(20), "shard-1");
  const std::string sst = LargestSst(shard_dir);
  ASSERT_FALSE(sst.empty());
  FlipByte(sst, std::filesystem::file_size(sst) / 3);

  auto v = VerifyCheckpoint(Ckpt(20));
  ASSERT_TRUE(v.status().Is(StatusCode::kCorruption)) << v.status();
  EXPECT_NE(v.status().message().find(shard_dir), std::string::npos)
      << v.status();

  // Shard 1's server reads the damaged shard: an error, naming it.
  auto t = new_model_.MakeTarget(1, 2);
  auto r = RestoreLatest(dir_.path(), {}, &t.target);
  ASSERT_TRUE(r.status().Is(StatusCode::kCorruption)) << r.status();
  EXPECT_NE(r.status().message().find("shard-1"), std::string::npos)
      << r.status();

  // Told to fall back: the previous complete checkpoint, whole.
  auto t2 = old_model_.MakeTarget(1, 2);
  auto f = RestoreLatest(dir_.path(), {.fallback = true}, &t2.target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->manifest.step(), 10u);
  ASSERT_EQ(f->skipped.size(), 1u);
  EXPECT_NE(f->skipped[0].find("shard-1"), std::string::npos);
  old_model_.ExpectRestored(t2.target);
}

// Restore maps the data files (allow_mmap_reads): a file cut short at rest
// must still be an error naming the shard, never a read past the mapping.
TEST_F(CheckpointIntegrity, TruncatedDataFileIsNamed) {
  const std::string shard_dir = JoinPath(Ckpt(20), "shard-1");
  const std::string sst = LargestSst(shard_dir);
  ASSERT_FALSE(sst.empty());
  for (uint64_t size : {std::filesystem::file_size(sst) / 2, uint64_t{7}}) {
    std::filesystem::resize_file(sst, size);
    auto t = new_model_.MakeTarget(1, 2);
    auto r = RestoreLatest(dir_.path(), {}, &t.target);
    ASSERT_TRUE(r.status().Is(StatusCode::kCorruption)) << r.status();
    EXPECT_NE(r.status().message().find("shard-1"), std::string::npos)
        << r.status();
  }
}

TEST_F(CheckpointIntegrity, FlippedManifestByteIsNamedAndFallbackIsOptIn) {
  const std::string manifest = JoinPath(Ckpt(20), "MANIFEST");
  FlipByte(manifest, std::filesystem::file_size(manifest) / 2);

  auto t = new_model_.MakeTarget(0, 2);
  auto r = RestoreLatest(dir_.path(), {}, &t.target);
  ASSERT_TRUE(r.status().Is(StatusCode::kCorruption)) << r.status();
  EXPECT_NE(r.status().message().find(manifest), std::string::npos)
      << r.status();
  auto v = VerifyCheckpoint(Ckpt(20));
  EXPECT_NE(v.status().message().find(manifest), std::string::npos)
      << v.status();

  auto t2 = old_model_.MakeTarget(0, 2);
  auto f = RestoreLatest(dir_.path(), {.fallback = true}, &t2.target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->manifest.step(), 10u);
  old_model_.ExpectRestored(t2.target);
}

TEST_F(CheckpointIntegrity, DeletedShardIsCorruption) {
  std::filesystem::remove_all(JoinPath(Ckpt(20), "shard-0"));
  auto v = VerifyCheckpoint(Ckpt(20));
  ASSERT_TRUE(v.status().Is(StatusCode::kCorruption)) << v.status();
  EXPECT_NE(v.status().message().find("shard 0"), std::string::npos);
}

}  // namespace
}  // namespace ps::checkpoint
