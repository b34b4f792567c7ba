// Restore with several readers per shard database (checkpoint/shard_scan.h):
// the rows are exactly the saved ones whatever the number of readers, on
// shards of many SST files (one reader per file), and on databases whose
// files overlap or whose write-ahead log holds an entry (key ranges of the
// database instead), which the shard writer never makes but which must still
// read back right.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>

#include "checkpoint/rocksdb_options.h"
#include "checkpoint/row_codec.h"
#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::ExpectRestoredWith;
using testing::Model;
using testing::TempDir;

// Every shard of `model` at `step`, written in SST files of about 128 KiB
// (several per shard), and the MANIFEST.
void WriteInSmallFiles(const std::string& root, const Model& model,
                       uint64_t step, uint32_t shards) {
  const std::string dir = JoinPath(root, CheckpointDirName(step));
  for (uint32_t k = 0; k < shards; ++k) {
    ShardWriteOptions o;
    o.target_file_bytes = 128 << 10;
    auto e = WriteShard(dir, model.Snapshot(k, shards, step), o);
    ASSERT_TRUE(e.ok()) << e.status();
  }
  CommitRequest c;
  c.checkpoint_dir = dir;
  c.step = step;
  c.num_shards = shards;
  c.tables = model.Specs();
  auto m = CommitCheckpoint(c);
  ASSERT_TRUE(m.ok()) << m.status();
}

size_t SstFiles(const std::string& shard_dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(shard_dir)) {
    n += e.path().extension() == ".sst";
  }
  return n;
}

TEST(CheckpointParallelScan, ManyFilesAnyNumberOfReaders) {
  TempDir dir;
  Model model;
  WriteInSmallFiles(dir.path(), model, 10, 2);
  const std::string ckpt = JoinPath(dir.path(), CheckpointDirName(10));
  // Enough files that the readers really split the work.
  ASSERT_GE(SstFiles(JoinPath(ckpt, "shard-0")), 6u);
  for (int readers : {1, 3, 8})
    ExpectRestoredWith(dir.path(), model, 3, readers);
  auto v = VerifyCheckpoint(ckpt);
  EXPECT_TRUE(v.ok()) << v.status();
}

enum class Change { kRewriteAndFlush, kDeleteInLog };

// Changes the entry of shard 0 that holds HASHED row `row` (the run it is
// in, checkpoint/row_codec.h) through RocksDB. kRewriteAndFlush: the value
// it has, flushed: a new file whose keys overlap the others', the shard's
// entries, count and checksum unchanged. kDeleteInLog: the entry deleted,
// left in the write-ahead log (the database then holds one entry fewer than
// the manifest records).
void ChangeRow(const std::string& ckpt, uint64_t row, Change change) {
  rocksdb::Options o = CheckpointDbOptions();
  o.avoid_flush_during_shutdown = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, JoinPath(ckpt, "shard-0"), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  char key[kKeyBytes];
  EncodeKey(testing::kHashed, row, key);
  std::string entry_key;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(rocksdb::ReadOptions()));
    it->SeekForPrev(rocksdb::Slice(key, kKeyBytes));
    ASSERT_TRUE(it->Valid()) << it->status().ToString();
    entry_key = it->key().ToString();
  }
  const rocksdb::Slice k(entry_key);
  if (change == Change::kRewriteAndFlush) {
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), k, &value).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, value).ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  } else {
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), k).ok());
  }
  ASSERT_TRUE(db->Close().ok());
}

TEST(CheckpointParallelScan, OverlappingFilesAreReadByKeyRange) {
  TempDir dir;
  Model model;
  WriteInSmallFiles(dir.path(), model, 10, 1);
  const std::string ckpt = JoinPath(dir.path(), CheckpointDirName(10));
  const size_t files = SstFiles(JoinPath(ckpt, "shard-0"));
  ChangeRow(ckpt, model.hashed_capacity / 2, Change::kRewriteAndFlush);
  ASSERT_EQ(SstFiles(JoinPath(ckpt, "shard-0")), files + 1);
  // Read file by file, the row would count twice (a count mismatch).
  for (int readers : {1, 4}) ExpectRestoredWith(dir.path(), model, 2, readers);
  auto v = VerifyCheckpoint(ckpt);
  EXPECT_TRUE(v.ok()) << v.status();
}

TEST(CheckpointParallelScan, AnEntryInTheLogIsSeen) {
  TempDir dir;
  Model model;
  WriteInSmallFiles(dir.path(), model, 10, 1);
  const std::string ckpt = JoinPath(dir.path(), CheckpointDirName(10));
  const size_t files = SstFiles(JoinPath(ckpt, "shard-0"));
  ChangeRow(ckpt, 7, Change::kDeleteInLog);
  ASSERT_EQ(SstFiles(JoinPath(ckpt, "shard-0")), files);
  // Read file by file, the deletion would go unseen and the restore pass.
  for (int readers : {1, 4}) {
    auto t = model.MakeTarget(0, 1);
    t.target.readers = readers;
    auto r = RestoreLatest(dir.path(), {}, &t.target);
    ASSERT_TRUE(r.status().Is(StatusCode::kCorruption)) << r.status();
    EXPECT_NE(r.status().message().find("entries, the manifest records"),
              std::string::npos)
        << r.status();
  }
}

}  // namespace
}  // namespace ps::checkpoint
