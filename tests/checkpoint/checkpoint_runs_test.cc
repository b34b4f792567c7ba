// Format 2: HASHED/DENSE entries hold runs of rows (checkpoint/row_codec.h).
// A chain mixing format-1 checkpoints (one row per entry) and format-2 ones
// restores exactly, runs cut by the new layout's shard boundaries restore
// exactly, and a damaged or forged run is a kCorruption that says what is
// wrong, never a crash or a silently wrong row.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "checkpoint/rocksdb_options.h"
#include "checkpoint/row_codec.h"
#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::ExpectRestoredWith;
using testing::Model;
using testing::TempDir;

// Every shard of `model` at `step` with at most `run_rows` rows per entry
// (0: the writer's default), and the MANIFEST. With `changed`, an
// incremental checkpoint of those rows on top of `parent`.
void Write(const std::string& root, const Model& model, uint64_t step,
           uint32_t shards, uint64_t run_rows, const std::string& parent = "",
           const std::function<bool(uint32_t, uint64_t)>* changed = nullptr) {
  auto m = testing::WriteCheckpoint(root, model, step, shards, parent, changed,
                                    run_rows);
  ASSERT_TRUE(m.ok()) << m.status();
}

// Rewrites the MANIFEST of the checkpoint at `step` through `edit`.
void EditManifest(const std::string& root, uint64_t step,
                  const std::function<void(proto::Manifest*)>& edit) {
  const std::string dir = JoinPath(root, CheckpointDirName(step));
  auto m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  edit(&*m);
  ASSERT_TRUE(WriteManifest(dir, *m).ok());
}

// What a program before format 2 wrote: one row per entry, format 1.
void WriteFormat1(
    const std::string& root, const Model& model, uint64_t step, uint32_t shards,
    const std::string& parent = "",
    const std::function<bool(uint32_t, uint64_t)>* changed = nullptr) {
  Write(root, model, step, shards, 1, parent, changed);
  EditManifest(root, step, [](proto::Manifest* m) {
    m->set_format_version(1);
    for (auto& s : *m->mutable_shards()) {
      for (auto& t : *s.mutable_tables()) t.clear_rows_per_entry();
    }
  });
}

TEST(CheckpointRuns, WriterMakesRunsAndRecordsTheirLength) {
  TempDir dir;
  Model model;
  Write(dir.path(), model, 10, 1, 0);
  auto m = ReadManifest(JoinPath(dir.path(), CheckpointDirName(10)));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version(), kFormatVersion);
  for (const auto& t : m->shards(0).tables()) {
    if (t.table_id() == testing::kExact) {
      EXPECT_EQ(t.rows_per_entry(), 0u);
      EXPECT_EQ(t.entries(), model.exact_keys);
      continue;
    }
    const ps::proto::TableSpec spec = model.Specs()[t.table_id() - 1];
    const uint64_t run =
        RowsPerRun(spec.dim(), Model::StateArrays(t.table_id()));
    EXPECT_EQ(t.rows_per_entry(), run);
    EXPECT_EQ(t.entries(), (spec.capacity() + run - 1) / run);
  }
  ExpectRestoredWith(dir.path(), model, 1);
  ExpectRestoredWith(dir.path(), model, 3);
  EXPECT_TRUE(
      VerifyCheckpoint(JoinPath(dir.path(), CheckpointDirName(10))).ok());
}

// Rows changed in stretches, so that an increment holds runs too.
const std::function<bool(uint32_t, uint64_t)> kChanged =
    [](uint32_t, uint64_t id) { return id % 1000 < 300 || id % 7 == 0; };
Model ChangedModel() {
  Model m;
  m.version = [](uint32_t, uint64_t id) { return kChanged(0, id) ? 1u : 0u; };
  return m;
}

TEST(CheckpointRuns, Format1BaseWithFormat2Increment) {
  TempDir dir;
  WriteFormat1(dir.path(), Model(), 10, 2);
  Write(dir.path(), ChangedModel(), 20, 2, 0, CheckpointDirName(10), &kChanged);
  auto base = ReadManifest(JoinPath(dir.path(), CheckpointDirName(10)));
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ(base->format_version(), 1u);
  for (uint32_t shards : {1u, 2u, 3u}) {
    ExpectRestoredWith(dir.path(), ChangedModel(), shards);
  }
}

TEST(CheckpointRuns, Format2BaseWithFormat1Increment) {
  TempDir dir;
  Write(dir.path(), Model(), 10, 2, 0);
  WriteFormat1(dir.path(), ChangedModel(), 20, 2, CheckpointDirName(10),
               &kChanged);
  for (uint32_t shards : {1u, 2u, 3u}) {
    ExpectRestoredWith(dir.path(), ChangedModel(), shards);
  }
  EXPECT_TRUE(
      VerifyCheckpoint(JoinPath(dir.path(), CheckpointDirName(20))).ok());
}

TEST(CheckpointRuns, RunsCutByTheNewShardBoundaries) {
  // Runs of 7 rows never line up with the boundaries of 3, 4 or 5 shards;
  // runs longer than a shard make each old shard's range one entry.
  for (uint64_t run : {7u, 1000000u}) {
    SCOPED_TRACE("runs of " + std::to_string(run));
    TempDir dir;
    Model model;
    Write(dir.path(), model, 10, 2, run);
    for (uint32_t shards : {3u, 4u, 5u}) {
      ExpectRestoredWith(dir.path(), model, shards);
    }
  }
}

std::string ShardDir(const std::string& root, uint64_t step, uint32_t k) {
  return JoinPath(JoinPath(root, CheckpointDirName(step)), ShardDirName(k));
}

// Restoring shard 0 of 1 fails with kCorruption whose message holds `what`.
void ExpectCorruption(const std::string& root, const std::string& what) {
  Model model;
  auto t = model.MakeTarget(0, 1);
  auto r = RestoreLatest(root, {}, &t.target);
  ASSERT_TRUE(r.status().Is(StatusCode::kCorruption)) << r.status();
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status();
}

TEST(CheckpointRuns, FlippedByteInARunIsNamed) {
  TempDir dir;
  Write(dir.path(), Model(), 10, 1, 0);
  const std::string shard = ShardDir(dir.path(), 10, 0);
  // The largest SST file is the HASHED table's; its middle is inside a run.
  std::string sst;
  uint64_t size = 0;
  for (const auto& e : std::filesystem::directory_iterator(shard)) {
    if (e.path().extension() == ".sst" && e.file_size() > size) {
      size = e.file_size();
      sst = e.path().string();
    }
  }
  ASSERT_FALSE(sst.empty());
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size / 2));
    char c;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.put(static_cast<char>(c ^ 0x01));
  }
  ExpectCorruption(dir.path(), shard);
  auto v = VerifyCheckpoint(JoinPath(dir.path(), CheckpointDirName(10)));
  ASSERT_TRUE(v.status().Is(StatusCode::kCorruption)) << v.status();
  EXPECT_NE(v.status().message().find(shard), std::string::npos) << v.status();
}

TEST(CheckpointRuns, RunLongerThanTheManifestAllowsIsRefused) {
  TempDir dir;
  Write(dir.path(), Model(), 10, 1, 0);
  // A format-1 manifest promises one row per entry.
  EditManifest(dir.path(), 10, [](proto::Manifest* m) {
    for (auto& t : *m->mutable_shards(0)->mutable_tables()) {
      t.clear_rows_per_entry();
    }
  });
  ExpectCorruption(dir.path(), "of at most 1 rows");
}

// Puts `value` at HASHED row `row` of shard 0 through RocksDB (left in its
// write-ahead log, which restore reads by key range).
void Forge(const std::string& root, uint64_t row, const std::string& value) {
  rocksdb::Options o = CheckpointDbOptions();
  o.avoid_flush_during_shutdown = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, ShardDir(root, 10, 0), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  char key[kKeyBytes];
  EncodeKey(testing::kHashed, row, key);
  ASSERT_TRUE(
      db->Put(rocksdb::WriteOptions(), rocksdb::Slice(key, kKeyBytes), value)
          .ok());
  ASSERT_TRUE(db->Close().ok());
}

TEST(CheckpointRuns, ForgedRunsAreRefused) {
  Model model;
  const size_t row = RowBytes(model.hashed_dim, 2);
  {
    SCOPED_TRACE("a value that is not whole rows");
    TempDir dir;
    Write(dir.path(), model, 10, 1, 0);
    Forge(dir.path(), 5, std::string(row + 4, 'x'));
    ExpectCorruption(dir.path(),
                     "expected a multiple of " + std::to_string(row));
  }
  {
    SCOPED_TRACE("a run inside the one before");
    TempDir dir;
    Write(dir.path(), model, 10, 1, 0);
    Forge(dir.path(), 5, std::string(row, 'x'));
    ExpectCorruption(dir.path(), "overlap the entry before");
  }
}

}  // namespace
}  // namespace ps::checkpoint
