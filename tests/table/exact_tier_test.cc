// The disk tier of EXACT tables (when_full: WHEN_FULL_MOVE_TO_DISK): rows
// beyond the memory bound move to a ColdRowStore and back, with their
// optimizer state, so that a tiered table with a small bound ends every
// push exactly where the same table entirely in memory does; pulls read
// rows from either tier; snapshots hold both; restores refill both; eviction
// by age reaches rows on disk. And RocksDbColdRowStore itself.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_scan.h"
#include "checkpoint/shard_writer.h"
#include "table/exact_table.h"
#include "table/rocksdb_cold_row_store.h"
#include "tests/temp_dir.h"

namespace ps::table {
namespace {

using ::ps::testing::TempDir;

proto::TableSpec Spec(uint64_t capacity, bool tier,
                      const std::string& optimizer = "adagrad") {
  proto::TableSpec s;
  s.set_id(5);
  s.set_name("ids");
  s.set_kind(proto::EXACT);
  s.set_dim(3);
  s.set_capacity(capacity);
  s.set_admit_after_pushes(1);
  s.set_when_full(tier ? proto::WHEN_FULL_MOVE_TO_DISK
                       : proto::WHEN_FULL_EVICT_LEAST_RECENT);
  s.mutable_optimizer()->set_name(optimizer);
  s.mutable_optimizer()->set_learning_rate(0.5f);
  s.mutable_initializer()->set_name("uniform");
  s.mutable_initializer()->set_scale(0.1f);
  return s;
}

// A tiered table whose rows are the sums of their gradients (optimizer
// "sum", zeros first), evicting after `evict_after_steps` (0: never).
proto::TableSpec Counting(uint64_t capacity, uint64_t evict_after_steps = 0) {
  proto::TableSpec s = Spec(capacity, true, "sum");
  s.clear_initializer();
  s.set_evict_after_steps(evict_after_steps);
  return s;
}

std::unique_ptr<ExactTable> Tiered(const proto::TableSpec& spec,
                                   const std::string& dir) {
  ExactTable::Options options;
  options.open_disk_tier = [dir](size_t record_bytes) {
    return RocksDbColdRowStore::Open(dir, record_bytes);
  };
  auto t = ExactTable::Create(spec, options);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// A snapshot with the rows it did not copy (TableSnapshot::spilled, the
// rows in memory written to a file, and uncopied, the disk tier's) copied
// in too: every row, as a restore takes them.
TableSnapshot WholeSnapshot(const ExactTable& t) {
  TableSnapshot snap;
  snap.spec = t.spec();
  EXPECT_TRUE(t.Snapshot(&snap).ok());
  const uint32_t dim = t.spec().dim();
  for (const auto* rows : {snap.spilled.get(), snap.uncopied.get()}) {
    if (rows == nullptr) continue;
    EXPECT_TRUE(rows->ForEach([&](uint64_t key, const float* values,
                                  const float* const* state, uint64_t last) {
                      snap.ids.push_back(key);
                      snap.values.insert(snap.values.end(), values,
                                         values + dim);
                      for (int k = 0; k < snap.state_arrays; ++k) {
                        snap.state[k].insert(snap.state[k].end(), state[k],
                                             state[k] + dim);
                      }
                      snap.last_update.push_back(last);
                    })
                    .ok());
  }
  snap.spilled = nullptr;
  snap.uncopied = nullptr;
  return snap;
}

// Every row of a snapshot by key: values, state, last update.
using Rows =
    std::map<uint64_t,
             std::tuple<std::vector<float>, std::vector<float>, uint64_t>>;
Rows RowsOf(const ExactTable& t) {
  const TableSnapshot snap = WholeSnapshot(t);
  const uint32_t dim = t.spec().dim();
  Rows rows;
  for (size_t i = 0; i < snap.ids.size(); ++i) {
    std::vector<float> state;
    for (int k = 0; k < snap.state_arrays; ++k) {
      state.insert(state.end(), snap.state[k].begin() + i * dim,
                   snap.state[k].begin() + (i + 1) * dim);
    }
    EXPECT_TRUE(
        rows.emplace(snap.ids[i],
                     std::make_tuple(std::vector<float>(
                                         snap.values.begin() + i * dim,
                                         snap.values.begin() + (i + 1) * dim),
                                     state, snap.last_update[i]))
            .second)
        << "key " << snap.ids[i] << " twice in a snapshot";
  }
  return rows;
}

struct Pulled {
  std::vector<float> values;
  std::vector<bool> present;
  bool operator==(const Pulled&) const = default;
};
Pulled Pull(const ExactTable& t, const std::vector<uint64_t>& keys) {
  Pulled p;
  p.values.resize(keys.size() * t.spec().dim());
  std::unique_ptr<bool[]> present(new bool[keys.size()]);
  EXPECT_TRUE(t.ReadKeys(keys, p.values, {present.get(), keys.size()}).ok());
  p.present.assign(present.get(), present.get() + keys.size());
  return p;
}

// An 8-byte record holding `v`.
std::vector<std::byte> Record8(uint64_t v) {
  std::vector<std::byte> r(8);
  std::memcpy(r.data(), &v, 8);
  return r;
}

using Records = std::map<uint64_t, std::vector<std::byte>>;

// Every record a ForEach gives, by key.
template <class Source>
Records ReadAll(const Source& source) {
  Records seen;
  EXPECT_TRUE(source
                  .ForEach([&](uint64_t key, std::span<const std::byte> r) {
                    seen[key].assign(r.begin(), r.end());
                  })
                  .ok());
  return seen;
}

// Keys 1, 2 and 3 stored, `take` (Pin, Link) called, then key 2 deleted, 4
// added and 1 changed: what `take` took must read {1, 2, 3} as stored.
template <class Take>
auto StoreThreeThenChange(ColdRowStore& store, Take take) {
  for (uint64_t key : {1, 2, 3}) EXPECT_TRUE(store.Put(key, Record8(key)).ok());
  auto taken = take();
  EXPECT_TRUE(store.Delete(2).ok());
  EXPECT_TRUE(store.Put(4, Record8(4)).ok());
  EXPECT_TRUE(store.Put(1, Record8(10)).ok());
  return taken;
}

const Records kFirstThree = {{1, Record8(1)}, {2, Record8(2)}, {3, Record8(3)}};

TEST(RocksDbColdRowStoreTest, PutGetDeleteClearAndForEachInKeyOrder) {
  TempDir dir;
  auto store = RocksDbColdRowStore::Open(dir.path() + "/store", 8).value();
  for (uint64_t key :
       {UINT64_MAX, uint64_t{5}, uint64_t{1} << 40, uint64_t{0}}) {
    ASSERT_TRUE(store->Put(key, Record8(key ^ 7)).ok());
  }
  std::vector<std::byte> got(8);
  ASSERT_TRUE(store->Get(uint64_t{1} << 40, got).value());
  EXPECT_EQ(got, Record8((uint64_t{1} << 40) ^ 7));
  EXPECT_FALSE(store->Get(6, got).value());
  ASSERT_TRUE(store->Delete(5).ok());
  std::vector<uint64_t> keys;
  ASSERT_TRUE(store
                  ->ForEach([&](uint64_t key, std::span<const std::byte> r) {
                    keys.push_back(key);
                    EXPECT_EQ(std::vector<std::byte>(r.begin(), r.end()),
                              Record8(key ^ 7));
                  })
                  .ok());
  EXPECT_EQ(keys, (std::vector<uint64_t>{0, uint64_t{1} << 40, UINT64_MAX}));
  EXPECT_EQ(store->bytes_written(), 32u);
  EXPECT_EQ(store->bytes_read(), 8u);
  // Many at once, on the store's threads: found or not, in the keys' order.
  const std::vector<uint64_t> many = {UINT64_MAX, 5, 0, 6, uint64_t{1} << 40};
  std::vector<std::byte> records(many.size() * 8);
  std::vector<uint8_t> found(many.size());
  ASSERT_TRUE(store->GetMany(many, records, found).ok());
  EXPECT_EQ(found, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  for (size_t i : {0, 2, 4}) {
    EXPECT_EQ(std::vector<std::byte>(records.begin() + 8 * i,
                                     records.begin() + 8 * (i + 1)),
              Record8(many[i] ^ 7));
  }
  EXPECT_EQ(store->GetMany(many, records, std::span(found).first(2)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RocksDbColdRowStore::Open(dir.path() + "/other", 8, 0).status().code(),
      StatusCode::kInvalidArgument);
  ASSERT_TRUE(store->Clear().ok());
  keys.clear();
  ASSERT_TRUE(
      store->ForEach([&](uint64_t key, auto) { keys.push_back(key); }).ok());
  EXPECT_TRUE(keys.empty());
  // What a record of the wrong size would be is refused on read.
  ASSERT_TRUE(store->Put(9, std::vector<std::byte>(4)).ok());
  auto wrong = store->Get(9, got);
  EXPECT_EQ(wrong.status().code(), StatusCode::kCorruption) << wrong.status();
}

// A view (Pin) reads the records as they were when pinned, while the store
// changes, and keeps the files after the store is gone; the last of the
// two deletes them.
TEST(RocksDbColdRowStoreTest, PinnedViewsReadTheirMomentAndOutliveTheStore) {
  TempDir dir;
  const std::string path = dir.path() + "/store";
  auto store = RocksDbColdRowStore::Open(path, 8).value();
  auto view =
      StoreThreeThenChange(*store, [&] { return store->Pin().value(); });
  store.reset();
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(ReadAll(*view), kFirstThree);
  view.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Link: the store's files at the moment of the call, hard links in a
// folder of their own that reads that moment after the store changes and
// after it is gone; PlaceAt links them again elsewhere (same inodes); the
// folder goes with the object, what PlaceAt made stays.
TEST(RocksDbColdRowStoreTest, LinkedFilesHoldTheirMomentAndPlaceByLinks) {
  TempDir dir;
  const std::string path = dir.path() + "/store";
  auto store = RocksDbColdRowStore::Open(path, 8).value();
  auto files =
      StoreThreeThenChange(*store, [&] { return store->Link().value(); });
  const std::string placed = dir.path() + "/placed";
  ASSERT_TRUE(files->PlaceAt(placed, {}).ok());
  EXPECT_EQ(files->PlaceAt(placed, {}).code(), StatusCode::kIOError)
      << "the folder exists";
  // Each table file placed is the store's own file, not a copy.
  int linked = 0;
  for (const auto& e : std::filesystem::directory_iterator(placed)) {
    if (e.path().extension() != ".sst") continue;
    ++linked;
    const std::string in_store = path + "/" + e.path().filename().string();
    ASSERT_TRUE(std::filesystem::exists(in_store)) << in_store;
    EXPECT_TRUE(std::filesystem::equivalent(e.path(), in_store));
    EXPECT_GE(std::filesystem::hard_link_count(e.path()), 3u);
  }
  EXPECT_GE(linked, 1);
  store.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(ReadAll(*files), kFirstThree);
  files.reset();
  EXPECT_FALSE(std::filesystem::exists(path + ".links"));
  // What PlaceAt made stays: a database of its own (checkpoints read it).
  EXPECT_TRUE(std::filesystem::exists(placed + "/CURRENT"));
}

// Adopt takes a folder PlaceAt made, in place of every record; a folder
// that is not plain files is refused before anything changes; one that is
// no database leaves the store empty and usable.
TEST(RocksDbColdRowStoreTest, AdoptTakesPlacedFilesAndRecoversFromBadOnes) {
  TempDir dir;
  auto source = RocksDbColdRowStore::Open(dir.path() + "/source", 8).value();
  for (uint64_t key : {1, 2}) ASSERT_TRUE(source->Put(key, Record8(key)).ok());
  ASSERT_TRUE(source->Link().value()->PlaceAt(dir.path() + "/placed", {}).ok());
  auto store = RocksDbColdRowStore::Open(dir.path() + "/store", 8).value();
  ASSERT_TRUE(store->Put(9, Record8(9)).ok());
  for (int time = 0; time < 2; ++time) {  // twice into the same folder
    ASSERT_TRUE(store->Adopt(dir.path() + "/placed").ok()) << time;
    std::vector<std::byte> got(8);
    EXPECT_EQ(store->Get(2, got).value(), true);
    EXPECT_EQ(got, Record8(2));
    EXPECT_EQ(store->Get(9, got).value(), false) << "replaced";
  }
  std::filesystem::create_directory_symlink(dir.path() + "/placed",
                                            dir.path() + "/linked");
  EXPECT_EQ(store->Adopt(dir.path() + "/linked").code(),
            StatusCode::kCorruption);
  std::vector<std::byte> got(8);
  EXPECT_EQ(store->Get(1, got).value(), true) << "nothing changed";
  std::filesystem::create_directory(dir.path() + "/junk");
  std::ofstream(dir.path() + "/junk/CURRENT") << "not a database\n";
  EXPECT_EQ(store->Adopt(dir.path() + "/junk").code(), StatusCode::kIOError);
  EXPECT_EQ(store->Get(1, got).value(), false) << "empty";
  ASSERT_TRUE(store->Put(3, Record8(3)).ok()) << "usable";
  EXPECT_EQ(store->Get(3, got).value(), true);
}

// This test binary, filtered to one test (a child's command line).
std::string ThisBinaryRunning(const std::string& test) {
  return std::filesystem::read_symlink("/proc/self/exe").string() +
         " --gtest_filter=" + test;
}

// Runs a shell command: its output (stdout and stderr) and exit status.
struct ChildRun {
  std::string output;
  int status = -1;
};
ChildRun RunShell(const std::string& command) {
  ChildRun run;
  FILE* child = ::popen((command + " 2>&1").c_str(), "r");
  if (child == nullptr) return run;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), child)) {
    run.output.append(buf, n);
  }
  run.status = ::pclose(child);
  return run;
}

constexpr char kKilledDirEnv[] = "PS_TIER_TEST_KILLED_DIR";

// Fills a store past its memtable, so that RocksDB writes files, then ends
// the process without destructors, as a kill -9 would.
TEST(RocksDbColdRowStoreTest, KilledChild) {
  const char* dir = std::getenv(kKilledDirEnv);
  if (dir == nullptr) GTEST_SKIP() << "run by OpenEmptiesWhatAKilled...";
  auto store = RocksDbColdRowStore::Open(dir, 128).value();
  for (uint64_t k = 0; k < 400000; ++k) {
    ASSERT_TRUE(store->Put(k, std::vector<std::byte>(128)).ok());
  }
  std::fflush(stdout);
  ::_exit(0);
}

TEST(RocksDbColdRowStoreTest,
     OpenEmptiesWhatAKilledProcessLeftAndCloseDeletes) {
  TempDir dir;
  const std::string store_dir = dir.path() + "/store";
  const ChildRun child =
      RunShell(std::string(kKilledDirEnv) + "=" + store_dir + " " +
               ThisBinaryRunning("RocksDbColdRowStoreTest.KilledChild"));
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
      << child.output;
  uintmax_t left = 0;
  for (const auto& f : std::filesystem::directory_iterator(store_dir)) {
    if (f.path().extension() == ".sst") left += f.file_size();
  }
  ASSERT_GT(left, 0u) << "the child left no files to empty";
  {
    auto store = RocksDbColdRowStore::Open(store_dir, 128).value();
    std::vector<std::byte> got(128);
    EXPECT_FALSE(store->Get(5, got).value());
    for (const auto& f : std::filesystem::directory_iterator(store_dir)) {
      EXPECT_NE(f.path().extension(), ".sst") << f.path();
    }
    ASSERT_TRUE(store->Put(5, got).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(store_dir)) << "scratch left behind";
}

TEST(RocksDbColdRowStoreTest, AFolderThatCannotBeMadeIsAnIOError) {
  TempDir dir;
  const std::string file = dir.path() + "/a_file";
  std::ofstream(file) << "x";
  auto store = RocksDbColdRowStore::Open(file + "/tier", 8);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kIOError) << store.status();
  EXPECT_NE(store.status().message().find(file), std::string::npos)
      << store.status();
}

TEST(ExactTierTest, ATierNeedsAFolder) {
  auto t = ExactTable::Create(Spec(10, true));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("--disk_tier_dir"), std::string::npos)
      << t.status();
}

// The same pushes (integer gradients, keys drawn from a set ten times the
// bound, steps rising) into a tiered table of 40 rows in memory and into a
// table that holds them all: after every push both give the same pulls,
// and at the end the same rows, Adagrad state and last updates; the tiered
// one kept at most 40 in memory and moved rows both ways.
TEST(ExactTierTest, RowsMoveBothWaysAndEndWhereAllInMemoryDoes) {
  TempDir dir;
  constexpr uint64_t kBound = 40, kKeys = 400;
  auto tiered = Tiered(Spec(kBound, true), dir.path());
  auto all = ExactTable::Create(Spec(kKeys, false)).value();
  std::mt19937_64 rng(11);
  for (uint64_t step = 1; step <= 60; ++step) {
    std::vector<uint64_t> keys(30);
    std::vector<float> grads;
    for (auto& k : keys) {
      k = 1000 + rng() % kKeys;
      for (int j = 0; j < 3; ++j) {
        grads.push_back(static_cast<float>(int(rng() % 7) - 3));
      }
    }
    ASSERT_TRUE(tiered->ApplyKeys(step, keys, grads).ok());
    ASSERT_TRUE(all->ApplyKeys(step, keys, grads).ok());
    std::vector<uint64_t> probe(50);
    for (auto& k : probe) k = 1000 + rng() % (kKeys + 20);
    ASSERT_EQ(Pull(*tiered, probe), Pull(*all, probe)) << "step " << step;
    ASSERT_LE(tiered->counters().rows, kBound);
  }
  EXPECT_EQ(RowsOf(*tiered), RowsOf(*all));
  const TableCounters c = tiered->counters();
  EXPECT_EQ(c.rows, kBound);
  EXPECT_EQ(c.rows + c.rows_on_disk, all->counters().rows);
  EXPECT_GT(c.demoted, 0u);
  EXPECT_GT(c.promoted, 0u);
  EXPECT_EQ(c.evicted, 0u);
  EXPECT_EQ(c.dropped_pushes, 0u);
  EXPECT_EQ(c.disk_bytes_written,
            c.demoted * ExactPartition::ColdRecordBytes(3, 1));
  EXPECT_GT(c.disk_bytes_read, 0u);
}

// 300 keys pushed 30 at a time, a step each, into a table of bound 50:
// 250 of them end on disk.
std::vector<uint64_t> PushKeysPastTheBound(ExactTable& t) {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(k * 7919);
  for (size_t b = 0; b < keys.size(); b += 30) {
    std::vector<uint64_t> part(keys.begin() + b, keys.begin() + b + 30);
    EXPECT_TRUE(t.ApplyKeys(b + 1, part, std::vector<float>(90, 1.0f)).ok());
  }
  EXPECT_EQ(t.counters().rows_on_disk, 250u);
  return keys;
}

TEST(ExactTierTest, SnapshotHoldsBothTiersAndRestoreRefillsThem) {
  TempDir dir;
  auto t = Tiered(Spec(50, true), dir.path() + "/a");
  const std::vector<uint64_t> keys = PushKeysPastTheBound(*t);
  const Rows saved = RowsOf(*t);
  ASSERT_EQ(saved.size(), 300u);

  const TableSnapshot snap = WholeSnapshot(*t);
  auto restore = [&](Table& into) {
    TableTarget target;
    EXPECT_TRUE(into.PrepareRestore(&target).ok());
    target.exact = snap;
    target.optimizer_steps = snap.optimizer_steps;
    return into.FinishRestore(&target);
  };
  // Into a tiered table of the same bound: the 50 newest in memory.
  auto again = Tiered(Spec(50, true), dir.path() + "/b");
  ASSERT_TRUE(again
                  ->ApplyKeys(1, std::vector<uint64_t>{424242},
                              std::vector<float>(3, 1.0f))
                  .ok());  // a row the restore must drop
  ASSERT_TRUE(restore(*again).ok());
  EXPECT_EQ(RowsOf(*again), saved);
  EXPECT_EQ(again->counters().rows, 50u);
  EXPECT_EQ(again->counters().rows_on_disk, 250u);
  for (size_t i = 270; i < keys.size(); ++i) {  // pushed last, at step 271
    EXPECT_TRUE(again->HasRow(keys[i])) << "newest rows stay in memory";
  }
  EXPECT_EQ(Pull(*again, keys), Pull(*t, keys));
  // Into one in memory that is large enough: all in memory.
  auto big = ExactTable::Create(Spec(300, false)).value();
  ASSERT_TRUE(restore(*big).ok());
  EXPECT_EQ(RowsOf(*big), saved);
  // Into one in memory that is not: refused, as before tiers.
  auto small = ExactTable::Create(Spec(50, false)).value();
  EXPECT_EQ(restore(*small).code(), StatusCode::kResourceExhausted);
}

// A shard written by WriteShard, read back by ScanShard with `readers`
// threads: every entry's value by key.
StatusOr<std::map<uint64_t, std::string>> ScanBack(
    const std::string& checkpoint, const proto::TableSpec& spec,
    const checkpoint::proto::ShardEntry& shard, int readers) {
  class Collect final : public checkpoint::EntrySink {
   public:
    Collect(std::mutex* mu, std::map<uint64_t, std::string>* out)
        : mu_(mu), out_(out) {}
    Status Add(const checkpoint::ScanTable&, uint64_t id, uint64_t,
               std::string_view value) override {
      std::lock_guard lock(*mu_);
      if (!out_->emplace(id, std::string(value)).second) {
        return Internal("key " + std::to_string(id) + " twice");
      }
      return Status::OK();
    }

   private:
    std::mutex* mu_;
    std::map<uint64_t, std::string>* out_;
  };
  checkpoint::proto::Manifest m;
  m.set_num_shards(1);
  *m.add_tables() = spec;
  *m.add_shards() = shard;
  std::mutex mu;
  std::map<uint64_t, std::string> rows;
  std::vector<std::unique_ptr<Collect>> sinks;
  uint64_t bytes = 0;
  PS_RETURN_IF_ERROR(checkpoint::ScanShard(
      checkpoint, m, shard, {.readers = readers},
      [&](size_t) {
        sinks.push_back(std::make_unique<Collect>(&mu, &rows));
        return sinks.back().get();
      },
      &bytes));
  return rows;
}

// A checkpoint of a tiered table writes the rows in memory and links the
// disk tier's files as they were at the cut into a folder beside the
// shard's database ("shard-0.disk-5"): the same entries and checksum as
// every row copied gives, read back the same (by one reader or several),
// though rows moved both ways after the cut. A manifest that points the
// rows on disk elsewhere, a folder gone, and a key in both parts are
// refused.
TEST(ExactTierTest, CheckpointsLinkTheRowsOnDiskAndReadThemBack) {
  TempDir dir;
  auto t = Tiered(Spec(50, true), dir.path() + "/tier");
  const std::vector<uint64_t> keys = PushKeysPastTheBound(*t);
  checkpoint::ShardSnapshot linked, copied;
  linked.tables.emplace_back();
  linked.tables[0].spec = t->spec();
  ASSERT_TRUE(t->Snapshot(&linked.tables[0]).ok());
  ASSERT_NE(linked.tables[0].uncopied, nullptr);
  ASSERT_TRUE(linked.tables[0].uncopied->linked());
  // The rows in memory are spilled to a file without a name, not copied.
  EXPECT_TRUE(linked.tables[0].ids.empty());
  ASSERT_NE(linked.tables[0].spilled, nullptr);
  uint64_t spilled = 0, last = 0;
  ASSERT_TRUE(linked.tables[0]
                  .spilled
                  ->ForEach([&](uint64_t key, const float*, const float* const*,
                                uint64_t) {
                    EXPECT_TRUE(spilled == 0 || key > last) << key;
                    last = key;
                    ++spilled;
                  })
                  .ok());
  EXPECT_EQ(spilled, 50u);
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_TRUE(e.path().filename() == "tier" ||
                e.path().filename() == "tier.links")
        << e.path();
  }
  copied.tables.push_back(WholeSnapshot(*t));
  ASSERT_EQ(copied.tables[0].ids.size(), 300u);
  // After the cut: rows on disk come back, others go out, all change.
  ASSERT_TRUE(t->ApplyKeys(400, std::span(keys).first(100),
                           std::vector<float>(300, 5.0f))
                  .ok());
  ASSERT_GT(t->counters().promoted, 0u);
  checkpoint::ShardWriteOptions o;
  o.target_file_bytes = 2048;  // several files
  auto a = checkpoint::WriteShard(dir.path() + "/a", linked, o);
  auto b = checkpoint::WriteShard(dir.path() + "/b", copied, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->entries(), 300u);
  EXPECT_EQ(a->tables(0).entries(), 300u);
  EXPECT_EQ(a->checksum(), b->checksum());
  EXPECT_EQ(a->tables(0).disk_tier_path(), "shard-0.disk-5");
  EXPECT_EQ(b->tables(0).disk_tier_path(), "");
  EXPECT_GT(a->linked_bytes(), 0u);
  EXPECT_EQ(b->linked_bytes(), 0u);
  // The table files are the tier's own, linked.
  const std::string part = dir.path() + "/a/shard-0.disk-5";
  int shared = 0;
  for (const auto& e : std::filesystem::directory_iterator(part)) {
    const std::string in_tier =
        dir.path() + "/tier/" + e.path().filename().string();
    if (e.path().extension() == ".sst" && std::filesystem::exists(in_tier) &&
        std::filesystem::equivalent(e.path(), in_tier)) {
      ++shared;
    }
  }
  EXPECT_GE(shared, 1);
  const auto copied_rows = ScanBack(dir.path() + "/b", t->spec(), *b, 1);
  ASSERT_TRUE(copied_rows.ok()) << copied_rows.status();
  ASSERT_EQ(copied_rows->size(), 300u);
  for (int readers : {1, 3}) {
    const auto rows = ScanBack(dir.path() + "/a", t->spec(), *a, readers);
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(*rows, *copied_rows) << readers << " readers";
  }

  checkpoint::proto::ShardEntry elsewhere = *a;
  elsewhere.mutable_tables(0)->set_disk_tier_path("../b/shard-0");
  auto refused = ScanBack(dir.path() + "/a", t->spec(), elsewhere, 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_NE(refused.status().message().find("names rows on disk at"),
            std::string::npos)
      << refused.status();
  checkpoint::proto::ShardEntry arrays = *a;
  arrays.mutable_tables(0)->set_state_arrays(7);
  refused = ScanBack(dir.path() + "/a", t->spec(), arrays, 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_NE(refused.status().message().find("7 optimizer state arrays"),
            std::string::npos)
      << refused.status();
  std::filesystem::rename(part, part + ".gone");
  refused = ScanBack(dir.path() + "/a", t->spec(), *a, 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_NE(refused.status().message().find("cannot open the rows on disk"),
            std::string::npos)
      << refused.status();
  // A link in its place, even to the real folder, is not read.
  std::filesystem::create_directory_symlink(part + ".gone", part);
  refused = ScanBack(dir.path() + "/a", t->spec(), *a, 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_NE(refused.status().message().find("not a folder"), std::string::npos)
      << refused.status();
  // Rows spilled are refused beside copied ones, and without the rows on
  // disk linked.
  for (bool copied_too : {true, false}) {
    checkpoint::ShardSnapshot bad;
    bad.tables.push_back(linked.tables[0]);
    if (copied_too) {
      bad.tables[0].ids = {1};
      bad.tables[0].values = {1, 2, 3};
      bad.tables[0].state[0] = {1, 2, 3};
      bad.tables[0].last_update = {1};
    } else {
      bad.tables[0].uncopied = nullptr;
    }
    auto written = checkpoint::WriteShard(
        dir.path() + "/bad" + std::to_string(copied_too), bad, o);
    EXPECT_EQ(written.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(written.status().message().find("rows spilled"),
              std::string::npos)
        << written.status();
  }
  // Every row copied and the rows on disk linked as well: each key of the
  // disk is twice.
  checkpoint::ShardSnapshot both;
  both.tables.push_back(WholeSnapshot(*t));
  both.tables[0].uncopied = linked.tables[0].uncopied;
  auto c = checkpoint::WriteShard(dir.path() + "/c", both, o);
  ASSERT_TRUE(c.ok()) << c.status();
  refused = ScanBack(dir.path() + "/c", t->spec(), *c, 2);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_NE(refused.status().message().find("both in the shard's database"),
            std::string::npos)
      << refused.status();
}

// The .sst files of folder `a` that are the same files (inodes) as one in
// folder `b`.
int SharedTableFiles(const std::string& a, const std::string& b) {
  int shared = 0;
  for (const auto& e : std::filesystem::directory_iterator(a)) {
    const std::string other = b + "/" + e.path().filename().string();
    if (e.path().extension() == ".sst" && std::filesystem::exists(other) &&
        std::filesystem::equivalent(e.path(), other)) {
      ++shared;
    }
  }
  return shared;
}

// A restore of a checkpoint whose rows on disk were linked, into the same
// shard of the same layout, adopts the checkpoint's files into its disk
// tier (hard links: no row written), puts the rows that were in memory on
// disk as well, and continues the table's clock from the cut. Into another
// layout (two shards) each shard reads and puts its rows instead.
TEST(ExactTierTest, RestoresAdoptTheLinkedRowsOnDisk) {
  TempDir dir;
  auto tiered = [&](const std::string& name, uint64_t seconds) {
    ExactTable::Options options;
    options.clock = [seconds] { return seconds; };
    const std::string store = dir.path() + "/" + name;
    options.open_disk_tier = [store](size_t record_bytes) {
      return RocksDbColdRowStore::Open(store, record_bytes);
    };
    return ExactTable::Create(Spec(50, true), options).value();
  };
  auto t = tiered("a", 1000);
  PushKeysPastTheBound(*t);
  const Rows saved = RowsOf(*t);
  const std::string ckpt = dir.path() + "/root/ckpt-000000000007";
  checkpoint::ShardSnapshot snap;
  snap.step = 7;
  snap.tables.emplace_back();
  snap.tables[0].spec = t->spec();
  ASSERT_TRUE(t->Snapshot(&snap.tables[0]).ok());
  ASSERT_TRUE(checkpoint::WriteShard(ckpt, snap, {}).ok());
  checkpoint::CommitRequest commit;
  commit.checkpoint_dir = ckpt;
  commit.step = 7;
  commit.tables = {t->spec()};
  ASSERT_TRUE(checkpoint::CommitCheckpoint(commit).ok());
  t.reset();
  snap.tables.clear();  // the tier's own links go: the checkpoint's stay

  auto restore = [&](Table& into, uint32_t shard, uint32_t shards) {
    checkpoint::RestoreTarget target;
    target.shard_id = shard;
    target.num_shards = shards;
    target.tables.emplace_back();
    target.tables[0].spec = into.spec();
    EXPECT_TRUE(into.PrepareRestore(&target.tables[0]).ok());
    const auto r = checkpoint::RestoreShard(ckpt, &target);
    EXPECT_TRUE(r.ok()) << r.status();
    return into.FinishRestore(&target.tables[0]);
  };
  auto again = tiered("b", 5);
  ASSERT_TRUE(restore(*again, 0, 1).ok());
  EXPECT_EQ(RowsOf(*again), saved);
  const TableCounters c = again->counters();
  EXPECT_EQ(c.rows, 0u);
  EXPECT_EQ(c.rows_on_disk, 300u);
  EXPECT_GE(SharedTableFiles(dir.path() + "/b", ckpt + "/shard-0.disk-5"), 1)
      << "adopted by links";
  TableSnapshot after;
  after.spec = again->spec();
  ASSERT_TRUE(again->Snapshot(&after).ok());
  EXPECT_EQ(after.clock_s, 1000u) << "the clock goes on from the cut";
  after = TableSnapshot();
  // Again into the same tier folder (a restart, or a fallback): the same.
  ASSERT_TRUE(restore(*again, 0, 1).ok());
  EXPECT_EQ(RowsOf(*again), saved);
  EXPECT_EQ(again->counters().rows_on_disk, 300u);

  Rows both;
  for (uint32_t shard : {0u, 1u}) {
    auto part = tiered("c" + std::to_string(shard), 5);
    ASSERT_TRUE(restore(*part, shard, 2).ok());
    const Rows rows = RowsOf(*part);
    EXPECT_GT(rows.size(), 0u);
    both.insert(rows.begin(), rows.end());
    EXPECT_EQ(SharedTableFiles(dir.path() + "/c" + std::to_string(shard),
                               ckpt + "/shard-0.disk-5"),
              0)
        << "another layout puts its rows";
  }
  EXPECT_EQ(both, saved);

  // A manifest whose clock would wrap the table's is refused.
  auto m = checkpoint::ReadManifest(ckpt).value();
  m.mutable_shards(0)->mutable_tables(0)->set_clock_seconds(UINT32_MAX);
  ASSERT_TRUE(checkpoint::WriteManifest(ckpt, m).ok());
  checkpoint::RestoreTarget hostile;
  hostile.tables.emplace_back();
  hostile.tables[0].spec = again->spec();
  ASSERT_TRUE(again->PrepareRestore(&hostile.tables[0]).ok());
  const auto refused = checkpoint::RestoreShard(ckpt, &hostile);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_NE(refused.status().message().find("clock"), std::string::npos)
      << refused.status();
}

// A restore into a tiered table streams the rows to disk as the reader
// reads them (TableTarget::exact_sink), never all in memory at once: every
// row is on disk after it (what was there before is gone), and comes back
// into memory as it is used.
TEST(ExactTierTest, RestoresStreamTheRowsToDisk) {
  TempDir dir;
  auto t = Tiered(Spec(50, true), dir.path() + "/a");
  const std::vector<uint64_t> keys = PushKeysPastTheBound(*t);
  const TableSnapshot saved = WholeSnapshot(*t);
  auto again = Tiered(Spec(50, true), dir.path() + "/b");
  ASSERT_TRUE(again
                  ->ApplyKeys(1, std::vector<uint64_t>{424242},
                              std::vector<float>(3, 1.0f))
                  .ok());  // a row the restore must drop
  TableTarget target;
  ASSERT_TRUE(again->PrepareRestore(&target).ok());
  ASSERT_NE(target.exact_sink, nullptr);
  EXPECT_FALSE(again->HasRow(424242));
  const float* state[kernels::kMaxOptimizerStates] = {};
  for (size_t i = 0; i < saved.ids.size(); ++i) {
    state[0] = &saved.state[0][i * 3];
    ASSERT_TRUE(target.exact_sink
                    ->Put(saved.ids[i], &saved.values[i * 3], state,
                          saved.last_update[i])
                    .ok());
  }
  ASSERT_TRUE(target.exact_sink->Delete(keys[0]).ok());  // a tombstone
  EXPECT_EQ(target.exact_sink->rows(), 299u);
  target.optimizer_steps = saved.optimizer_steps;
  ASSERT_TRUE(again->FinishRestore(&target).ok());
  TableCounters c = again->counters();
  EXPECT_EQ(c.rows, 0u);
  EXPECT_EQ(c.rows_on_disk, 299u);
  Rows want = RowsOf(*t);
  want.erase(keys[0]);
  EXPECT_EQ(RowsOf(*again), want);
  Pulled expected = Pull(*t, keys);
  expected.present[0] = false;
  std::fill_n(expected.values.begin(), 3, 0.0f);
  EXPECT_EQ(Pull(*again, keys), expected);
  EXPECT_EQ(again->counters().rows, 50u) << "pulled back, to the bound";
}

// A push of a key whose row lies idle on disk, where no sweep came by yet,
// deletes it and starts the key afresh (ExactPartition::Promote). Sweeps
// go round the rows on disk in key order, kDiskSweepRows a newer step: the
// one of step 3 reads keys 0..4095 (none idle yet), the one of step 20 the
// other 904 (idle: deleted) and wraps, so key 0 is left to its push. A
// pull brings a row back as it was (key 2), idle or not: eviction in
// memory deletes it at the next newer step.
TEST(ExactTierTest, RowsIdleOnDiskAreEvictedWhenTheirKeyComesBack) {
  TempDir dir;
  auto t = Tiered(Counting(10, 5), dir.path());
  constexpr uint64_t kOld = 5000;
  constexpr uint64_t kSwept = kOld - ExactTable::kDiskSweepRows;  // at 20
  std::vector<uint64_t> old_keys, new_keys;
  for (uint64_t k = 0; k < kOld; ++k) old_keys.push_back(k);
  for (uint64_t k = 0; k < 10; ++k) new_keys.push_back(kOld + k);
  ASSERT_TRUE(
      t->ApplyKeys(1, old_keys, std::vector<float>(3 * kOld, 2.0f)).ok());
  ASSERT_TRUE(t->ApplyKeys(3, new_keys, std::vector<float>(30, 1.0f)).ok());
  ASSERT_EQ(t->counters().rows_on_disk, kOld);
  // Read as it was, and back in memory, until a newer step evicts it.
  EXPECT_EQ(Pull(*t, {2}).values, (std::vector<float>{2, 2, 2}));
  EXPECT_TRUE(t->HasRow(2));
  // At step 20 the old rows are 19 steps idle.
  ASSERT_TRUE(
      t->ApplyKeys(20, std::vector<uint64_t>{0}, std::vector<float>(3, 1.0f))
          .ok());
  EXPECT_FALSE(t->HasRow(2));
  EXPECT_EQ(Pull(*t, {0}).values, (std::vector<float>{1, 1, 1}));
  EXPECT_FALSE(Pull(*t, {kOld - 1}).present[0]) << "swept";
  EXPECT_TRUE(Pull(*t, {1}).present[0]) << "not swept yet";
  // Evicted: the new keys' rows and key 2's in memory (17 and 19 steps
  // idle), the rows swept on disk, and key 0's on disk. In memory: key 0
  // and key 1, which its pull brought back.
  const TableCounters c = t->counters();
  EXPECT_EQ(c.rows, 2u);
  EXPECT_EQ(c.rows_on_disk, kOld - kSwept - 3);
  EXPECT_EQ(c.evicted, 10 + 1 + kSwept + 1);
}

// Steps 1, 2, 3 each push kStepKeys keys (step * 10000 + 0, 1, ...) with
// gradients of the step's number into a Counting(2 * kStepKeys) table:
// then step 1's rows lie on disk, the others in memory.
constexpr uint64_t kStepKeys = 3200;
void PushThreeSteps(ExactTable& t) {
  for (uint64_t step = 1; step <= 3; ++step) {
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < kStepKeys; ++k) keys.push_back(step * 10000 + k);
    ASSERT_TRUE(
        t.ApplyKeys(step, keys, std::vector<float>(3 * kStepKeys, float(step)))
            .ok());
  }
  ASSERT_EQ(t.counters().rows_on_disk, kStepKeys);
}

// A pull reads the rows it misses from disk and brings them back into
// memory, at the newest end of their partitions' lists (moving the least
// recently updated out), their last update as it was: the push that
// follows finds them there and reads nothing from disk. (At least ~100
// rows a partition, as in use: a row brought back alone in its partition
// is its oldest, and the next row the shard needs takes it.)
TEST(ExactTierTest, PullsBringRowsBackForThePushThatFollows) {
  TempDir dir;
  auto t = Tiered(Counting(2 * kStepKeys), dir.path());
  ASSERT_NO_FATAL_FAILURE(PushThreeSteps(*t));
  std::vector<uint64_t> cold;  // four keys of step 1 on disk, one twice
  for (uint64_t k = 10000; cold.size() < 4; ++k) {
    if (!t->HasRow(k)) cold.push_back(k);
  }
  cold.push_back(cold.back());
  const Pulled p = Pull(*t, cold);
  EXPECT_EQ(p.values, std::vector<float>(15, 1.0f));
  EXPECT_EQ(p.present, std::vector<bool>(5, true));
  TableCounters c = t->counters();
  EXPECT_EQ(c.promoted, 4u);
  EXPECT_EQ(c.disk_hits, 5u);
  EXPECT_EQ(c.memory_hits, 0u);
  EXPECT_EQ(c.rows, 2 * kStepKeys);
  EXPECT_EQ(c.rows_on_disk, kStepKeys);
  for (uint64_t k : cold) EXPECT_TRUE(t->HasRow(k)) << k;
  EXPECT_EQ(std::get<2>(RowsOf(*t).at(cold[0])), 1u) << "last update";
  const uint64_t read = c.disk_bytes_read;
  ASSERT_TRUE(
      t->ApplyKeys(4, std::span(cold).first(4), std::vector<float>(12, 1.0f))
          .ok());
  EXPECT_EQ(t->counters().disk_bytes_read, read)
      << "the push found them in memory";
  EXPECT_EQ(t->counters().memory_hits, 4u);
  EXPECT_EQ(t->counters().disk_hits, 5u);
  EXPECT_EQ(Pull(*t, {cold[0]}).values, (std::vector<float>{2, 2, 2}));
  // Keys in neither tier read as absent, and stay absent.
  EXPECT_EQ(Pull(*t, {99}).present, std::vector<bool>{false});
  EXPECT_FALSE(t->HasRow(99));
}

// A pull of many rows on disk reads each once, in one batch of reads in
// flight however many chunks its keys span, and bringing them back reads
// none again (a partition's own moves in do not make its other records
// stale): not a second read each, one at a time.
TEST(ExactTierTest, PullsReadEachRowOnDiskOnce) {
  TempDir dir;
  auto t = Tiered(Counting(2 * kStepKeys), dir.path());
  ASSERT_NO_FATAL_FAILURE(PushThreeSteps(*t));
  std::vector<uint64_t> cold;  // ~10 a partition
  for (uint64_t k = 10000; cold.size() < 640; ++k) {
    if (!t->HasRow(k)) cold.push_back(k);
  }
  // Misses in two chunks of the pull (ExactTable::ReadKeys looks 4,096
  // keys at a time), rows in memory between them, and one key on disk
  // in both chunks: read in each, brought back once.
  std::vector<uint64_t> keys(cold.begin(), cold.begin() + 320);
  for (uint64_t k = 0; k < 2 * kStepKeys; ++k) {
    keys.push_back((k < kStepKeys ? 30000 : 20000 - kStepKeys) + k);
  }
  ASSERT_GT(keys.size(), 4096u);  // the rest is in the second chunk
  keys.insert(keys.end(), cold.begin() + 320, cold.end());
  keys.push_back(cold[0]);
  const TableCounters before = t->counters();
  const Pulled p = Pull(*t, keys);
  std::vector<float> expected;
  for (uint64_t k : keys) expected.insert(expected.end(), 3, float(k / 10000));
  EXPECT_EQ(p.values, expected);
  EXPECT_EQ(p.present, std::vector<bool>(keys.size(), true));
  const TableCounters after = t->counters();
  EXPECT_EQ(after.promoted - before.promoted, cold.size());
  EXPECT_EQ(after.disk_bytes_read - before.disk_bytes_read,
            (cold.size() + 1) * ExactPartition::ColdRecordBytes(3, 0));
  for (uint64_t k : cold) EXPECT_TRUE(t->HasRow(k)) << k;
}

// A pull reads records without locks and brings them back later
// (ExactPartition::BringBack). A record that changed meanwhile (the row
// came back, was updated and went out again: a disk delete in between)
// is read again, not brought back as it was read.
TEST(ExactTierTest, BringBackRereadsARecordThatMayHaveChanged) {
  TempDir dir;
  const proto::TableSpec spec = Counting(1);
  auto store = RocksDbColdRowStore::Open(dir.path(),
                                         ExactPartition::ColdRecordBytes(3, 0))
                   .value();
  RowBudget budget(1);
  ExactPartition p(spec, &budget, 0, 0, {}, store.get());
  auto push = [&](uint64_t step, uint64_t key) {
    const uint64_t hash = RowIndex::Mix(key);
    const std::vector<float> grad = {1, 1, 1};
    const uint32_t at = 0;
    ASSERT_TRUE(p.Apply(step, 0,
                        PartitionKeys{.keys = std::span(&key, 1),
                                      .values = grad,
                                      .positions = std::span(&at, 1),
                                      .hashes = std::span(&hash, 1)},
                        [] { return uint64_t{0}; })
                    .ok());
  };
  constexpr uint64_t kA = 7, kB = 8;
  push(1, kA);
  push(2, kB);  // A moves out, as 1
  std::vector<std::byte> as_read(store->record_bytes());
  uint64_t deletes;
  {
    std::shared_lock lock(p.lock());
    deletes = p.disk_deletes_locked();
    ASSERT_TRUE(store->Get(kA, as_read).value());
  }
  push(3, kA);  // A back (2), B out
  push(4, kB);  // B back, A out as 2
  const ExactPartition::PulledRow stale = {.key = kA,
                                           .hash = RowIndex::Mix(kA),
                                           .record = as_read,
                                           .disk_deletes = deletes};
  ASSERT_TRUE(p.BringBack(std::span(&stale, 1)).ok());
  std::shared_lock lock(p.lock());
  const float* row = p.FindLocked(kA, RowIndex::Mix(kA));
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row[0], 2.0f) << "the record on disk now, not the one read";
}

// Rows idle on disk whose keys never come back are deleted by the sweeps of
// newer steps (ExactTable::kDiskSweepRows rows on disk a step), not only
// when pushed: after enough steps of other keys, the old rows are gone
// from disk and read as absent, and the young ones stay.
TEST(ExactTierTest, SweepsOfNewerStepsDeleteIdleRowsOnDisk) {
  TempDir dir;
  auto t = Tiered(Counting(100, 50), dir.path());
  // 10,000 old keys at step 1: all but 100 of them on disk.
  std::vector<uint64_t> old_keys;
  for (uint64_t k = 0; k < 10000; ++k) old_keys.push_back(k * 7919 + 1);
  ASSERT_TRUE(t->ApplyKeys(1, old_keys, std::vector<float>(3 * 10000, 1)).ok());
  ASSERT_EQ(t->counters().rows_on_disk, 9900u);
  // Then steps 2..60 push 100 young keys each (kept on disk by the newer
  // ones, young enough): from step 52 on the old rows are idle, and the
  // sweeps of steps 52..60 (4,096 rows each) go round the disk.
  std::vector<uint64_t> young;
  for (uint64_t step = 2; step <= 60; ++step) {
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < 100; ++i) keys.push_back((step << 32) + i);
    young.insert(young.end(), keys.begin(), keys.end());
    ASSERT_TRUE(t->ApplyKeys(step, keys, std::vector<float>(300, 1)).ok());
  }
  const Pulled old_now = Pull(*t, old_keys);
  EXPECT_EQ(std::count(old_now.present.begin(), old_now.present.end(), true),
            0);
  // The young keys of steps 10..60 are at most 50 steps old: all kept.
  std::vector<uint64_t> kept(young.end() - 51 * 100, young.end());
  const Pulled kept_now = Pull(*t, kept);
  EXPECT_EQ(std::count(kept_now.present.begin(), kept_now.present.end(), true),
            static_cast<long>(kept.size()));
  const TableCounters c = t->counters();
  EXPECT_GE(c.evicted, 10000u);
  EXPECT_LE(c.rows + c.rows_on_disk, young.size());
}

// Writers push their own keys (each push adds {1, 2, 3}: a row is
// {n, 2n, 3n}) into a table of 64 rows in memory, so rows move to disk and
// back all the time, across partitions (a writer's partition takes another
// partition's oldest row), while readers pull and a snapshotter snapshots:
// every row read whole, every key ends with exactly its pushes. Run under
// TSan by the concurrency label.
TEST(ExactTierTest, ConcurrentPushesPullsAndSnapshotsKeepExactSums) {
  TempDir dir;
  auto table = Tiered(Counting(64), dir.path());
  constexpr int kWriters = 3, kRounds = 80, kBatch = 40;
  constexpr uint64_t kKeysPerWriter = 300;
  std::vector<std::vector<uint32_t>> pushes(
      kWriters, std::vector<uint32_t>(kKeysPerWriter, 0));
  auto key_of = [](int w, uint64_t i) { return (uint64_t(w + 1) << 32) + i; };
  auto whole = [](const std::vector<float>& v, size_t i) {
    const float n = v[3 * i];
    return n >= 1 && v[3 * i + 1] == 2 * n && v[3 * i + 2] == 3 * n;
  };
  std::atomic<bool> stop{false};
  std::atomic<int> problems{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      std::vector<float> grads;
      for (int i = 0; i < kBatch; ++i) grads.insert(grads.end(), {1, 2, 3});
      for (int r = 0; r < kRounds; ++r) {
        std::vector<uint64_t> keys(kBatch);
        for (auto& k : keys) {
          const uint64_t i = rng() % kKeysPerWriter;
          k = key_of(w, i);
          ++pushes[w][i];
        }
        if (!table->ApplyKeys(r + 1, keys, grads).ok()) ++problems;
      }
    });
  }
  // Two readers: their pulls bring rows back too.
  auto read = [&](int seed) {
    std::mt19937_64 rng(seed);
    while (!stop.load()) {
      std::vector<uint64_t> keys(kBatch);
      for (auto& k : keys) {
        k = key_of(rng() % kWriters, rng() % kKeysPerWriter);
      }
      const Pulled p = Pull(*table, keys);
      for (size_t i = 0; i < keys.size(); ++i) {
        if (p.present[i] && !whole(p.values, i)) {
          ADD_FAILURE() << "key " << keys[i] << " read torn";
          ++problems;
        }
      }
    }
  };
  std::thread readers[] = {std::thread(read, 99), std::thread(read, 98)};
  std::thread snapshotter([&] {
    while (!stop.load()) {
      // The rows on disk are read after Snapshot returns, from the view it
      // pinned, while the writers go on moving rows.
      const TableSnapshot snap = WholeSnapshot(*table);
      std::set<uint64_t> seen(snap.ids.begin(), snap.ids.end());
      if (seen.size() != snap.ids.size()) {
        ADD_FAILURE() << "a key in both tiers at once";
        ++problems;
      }
      for (size_t i = 0; i < snap.ids.size(); ++i) {
        if (!whole(snap.values, i)) ++problems;
      }
    }
  });
  for (auto& t : writers) t.join();
  stop = true;
  for (auto& r : readers) r.join();
  snapshotter.join();
  EXPECT_EQ(problems.load(), 0);
  uint64_t keys_pushed = 0;
  for (int w = 0; w < kWriters; ++w) {
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < kKeysPerWriter; ++i) keys.push_back(key_of(w, i));
    const Pulled p = Pull(*table, keys);
    for (uint64_t i = 0; i < kKeysPerWriter; ++i) {
      const uint32_t n = pushes[w][i];
      ASSERT_EQ(p.present[i], n > 0) << "writer " << w << " key " << i;
      ASSERT_EQ(p.values[3 * i], static_cast<float>(n))
          << "writer " << w << " key " << i;
      keys_pushed += n > 0;
    }
  }
  const TableCounters c = table->counters();
  EXPECT_EQ(c.rows + c.rows_on_disk, keys_pushed);
  EXPECT_EQ(c.dropped_pushes + c.refused_full + c.evicted, 0u);
  EXPECT_GT(c.demoted, 0u);
  EXPECT_GT(c.promoted, 0u);
  // Threads that found every other partition busy took rows beyond the
  // bound (ExactPartition::TakeFromBudget); pushes without contention
  // give them back.
  for (int round = 0; round < 4; ++round) {
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < 100; ++i) keys.push_back(key_of(round, i));
    ASSERT_TRUE(
        table->ApplyKeys(kRounds + 1, keys, std::vector<float>(300, 0.0f))
            .ok());
  }
  EXPECT_LE(table->counters().rows, 64u);
}

// Checkpoints on another file system than the disk tier (NFS, say), where
// the tier's files cannot be linked. The parent runs this binary again,
// filtered to ElsewhereChild, in a mount namespace of its own whose
// checkpoint root is a tmpfs; the mount dies with the child.
constexpr char kElsewhereEnv[] = "PS_TIER_TEST_ELSEWHERE_DIR";

TEST(ExactTierTest, ElsewhereChild) {
  const char* root = std::getenv(kElsewhereEnv);
  if (root == nullptr) GTEST_SKIP() << "run by CheckpointsElsewhere...";
  TempDir dir;
  auto t = Tiered(Spec(50, true), dir.path() + "/tier");
  const std::vector<uint64_t> keys = PushKeysPastTheBound(*t);
  auto checkpoint = [&](uint64_t step) {
    checkpoint::ShardSnapshot snap;
    snap.step = step;
    snap.tables.emplace_back();
    snap.tables[0].spec = t->spec();
    EXPECT_TRUE(t->Snapshot(&snap.tables[0]).ok());
    checkpoint::CommitRequest commit;
    commit.checkpoint_dir =
        std::string(root) + "/" + checkpoint::CheckpointDirName(step);
    commit.step = step;
    commit.tables = {t->spec()};
    auto entry = checkpoint::WriteShard(commit.checkpoint_dir, snap, {});
    EXPECT_TRUE(entry.ok()) << entry.status();
    EXPECT_TRUE(checkpoint::CommitCheckpoint(commit).ok());
    return std::make_pair(commit.checkpoint_dir + "/shard-0.disk-5", *entry);
  };
  const auto [first, a] = checkpoint(1);
  EXPECT_EQ(SharedTableFiles(first, dir.path() + "/tier"), 0)
      << "another file system: copied";
  // A few rows move: the files of the first cut stay in the tier.
  ASSERT_TRUE(
      t->ApplyKeys(400, std::span(keys).first(10), std::vector<float>(30, 5.0f))
          .ok());
  const Rows saved = RowsOf(*t);
  const auto [second, b] = checkpoint(2);
  const int shared = SharedTableFiles(second, first);
  EXPECT_GE(shared, 1) << "each file copied once, then linked";
  // Retention deletes the first checkpoint: the second reads whole.
  ASSERT_TRUE(checkpoint::RemoveTree(std::string(root) + "/" +
                                     checkpoint::CheckpointDirName(1))
                  .ok());
  const auto rows =
      ScanBack(second.substr(0, second.rfind('/')), t->spec(), b, 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), saved.size());
  std::printf("%d of the second checkpoint's table files shared\n", shared);
  // Leaves without the exit handlers: static destructors would race with
  // RocksDB's idle background threads (a TSan report at exit, with no
  // RocksDB frame to suppress it by). The status says whether it passed.
  std::fflush(nullptr);
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST(ExactTierTest, CheckpointsElsewhereCopyEachTierFileOnce) {
  if (::geteuid() != 0) GTEST_SKIP() << "a tmpfs mount needs root";
  TempDir dir;
  const ChildRun child = RunShell(
      "unshare --mount --propagation private sh -c 'mount -t tmpfs -o "
      "size=64m tmpfs " +
      dir.path() + " && " + kElsewhereEnv + "=" + dir.path() + " exec " +
      ThisBinaryRunning("ExactTierTest.ElsewhereChild") + "'");
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
      << child.output;
  EXPECT_NE(child.output.find("table files shared"), std::string::npos)
      << child.output;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A disk tier on a full disk. The parent runs this binary again, filtered
// to DiskFullChild, in a mount namespace of its own (util-linux unshare)
// whose tier folder is a 4 MiB tmpfs; the mount dies with the child.
constexpr char kFullDirEnv[] = "PS_TIER_TEST_FULL_DIR";

TEST(ExactTierTest, DiskFullChild) {
  const char* dir = std::getenv(kFullDirEnv);
  if (dir == nullptr) GTEST_SKIP() << "run by AFullDiskRefusesNewKeys...";
  proto::TableSpec spec = Counting(1000);
  spec.set_dim(16);
  auto t = Tiered(spec, dir);
  ASSERT_NE(t, nullptr);
  // 400,000 keys of 96-byte records: the 16 MiB memtable's first flush
  // does not fit, and from then on the store refuses rows.
  constexpr uint64_t kKeys = 400000, kBatch = 10000;
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < kKeys; ++k)
    keys.push_back(k * 0x9e3779b97f4a7c15ull);
  for (uint64_t b = 0; b < kKeys; b += kBatch) {
    std::vector<uint64_t> part(keys.begin() + b, keys.begin() + b + kBatch);
    std::vector<float> grads(kBatch * 16);
    for (uint64_t i = 0; i < kBatch; ++i) grads[i * 16] = float((b + i) % 1000);
    ASSERT_TRUE(t->ApplyKeys(b / kBatch + 1, part, grads).ok());
  }
  const TableCounters c = t->counters();
  ASSERT_GT(c.refused_full, 0u) << "the disk never filled";
  // Every key holds its push, in memory or on disk, or was refused.
  const Pulled p = Pull(*t, keys);
  uint64_t held = 0;
  for (uint64_t i = 0; i < kKeys; ++i) {
    if (!p.present[i]) continue;
    ++held;
    ASSERT_EQ(p.values[i * 16], float(i % 1000)) << "key " << i;
  }
  EXPECT_EQ(held, c.rows + c.rows_on_disk);
  EXPECT_EQ(held + c.refused_full, kKeys);
  EXPECT_GT(c.rows_on_disk, 0u);
  EXPECT_EQ(WholeSnapshot(*t).ids.size(), held);
  // A checkpoint cannot link the tier's files (RocksDB cannot write its
  // memtable out to link it): it writes the rows on disk instead, elsewhere,
  // every row held.
  checkpoint::ShardSnapshot snap;
  snap.tables.emplace_back();
  snap.tables[0].spec = t->spec();
  ASSERT_TRUE(t->Snapshot(&snap.tables[0]).ok());
  ASSERT_FALSE(snap.tables[0].uncopied->linked());
  TempDir out;
  const auto written = checkpoint::WriteShard(out.path() + "/ckpt", snap, {});
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->entries(), held);
  EXPECT_EQ(written->tables(0).disk_tier_path(), "");
  // Pushes to keys whose rows are on disk cannot bring them back (that
  // would move another row out): dropped and counted, the rows unchanged.
  std::vector<uint64_t> cold;
  for (uint64_t i = 0; i < kKeys && cold.size() < 100; ++i) {
    if (p.present[i] && !t->HasRow(keys[i])) cold.push_back(keys[i]);
  }
  ASSERT_EQ(cold.size(), 100u);
  const Pulled cold_before = Pull(*t, cold);
  ASSERT_TRUE(
      t->ApplyKeys(kKeys, cold, std::vector<float>(100 * 16, 1.0f)).ok());
  EXPECT_EQ(Pull(*t, cold), cold_before);
  EXPECT_EQ(t->counters().dropped_pushes, c.dropped_pushes + 100);
  std::printf("held %lu of %lu keys, %lu refused\n",
              static_cast<unsigned long>(held),
              static_cast<unsigned long>(kKeys),
              static_cast<unsigned long>(c.refused_full));
}

// Once the disk refuses rows, new keys are refused (counted) and the log
// says why; every row already held, in memory or on disk, still reads and
// snapshots exactly.
TEST(ExactTierTest, AFullDiskRefusesNewKeysAndLosesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "a tmpfs mount needs root";
  TempDir dir;
  const ChildRun child = RunShell(
      "unshare --mount --propagation private sh -c 'mount -t tmpfs -o "
      "size=4m tmpfs " +
      dir.path() + " && " + kFullDirEnv + "=" + dir.path() + " exec " +
      ThisBinaryRunning("ExactTierTest.DiskFullChild") + "'");
  const std::string& output = child.output;
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
      << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
  EXPECT_NE(output.find("cannot move a row to disk"), std::string::npos)
      << output;
  EXPECT_NE(output.find("No space left on device"), std::string::npos)
      << output;
  // The mount went with the child's namespace.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace ps::table
