// CheckpointFollower and ServedTables: a replica follows a root of real
// checkpoints (the checkpoint tests' model: HASHED with Adam state, DENSE,
// EXACT with Adagrad state) and every lookup is checked against a restore
// of the checkpoint its result names. Increments, tombstones, full
// checkpoints after increments, a change of layout, a subset of shards, a
// damaged checkpoint (skipped, the served one stays), and lookups racing
// the switches (each must see one checkpoint's rows).
#include "serving/checkpoint_follower.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "checkpoint/committer.h"
#include "checkpoint/shard_writer.h"
#include "tests/checkpoint/checkpoint_fixture.h"

namespace ps::serving {
namespace {

using checkpoint::CheckpointDirName;
using checkpoint::JoinPath;
using checkpoint::testing::kDense;
using checkpoint::testing::kExact;
using checkpoint::testing::kHashed;
using checkpoint::testing::Model;
using checkpoint::testing::TempDir;
using checkpoint::testing::WriteCheckpoint;

CheckpointFollower::Options Follow(std::string root,
                                   std::vector<uint32_t> shards = {},
                                   std::string disk_tier_dir = "") {
  CheckpointFollower::Options o;
  o.root = std::move(root);
  o.shards = std::move(shards);
  o.disk_tier.dir = std::move(disk_tier_dir);
  return o;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Every HASHED/DENSE row, some HASHED ids and every EXACT key (and keys
// without a row) as the served tables answer them, against a restore of
// `path` onto one shard (only `shards` of `num_shards` held).
void ExpectServes(const ServedTables& served, const std::string& path,
                  const Model& model, uint32_t num_shards,
                  std::vector<uint32_t> shards = {}) {
  SCOPED_TRACE(path);
  auto restored = model.MakeTarget(0, 1);
  ASSERT_TRUE(checkpoint::RestoreShard(path, &restored.target).ok());
  EXPECT_EQ(served.checkpoint().name,
            std::filesystem::path(path).filename().string());
  auto held = [&](uint32_t s) {
    return shards.empty() ||
           std::find(shards.begin(), shards.end(), s) != shards.end();
  };
  for (const auto& t : restored.target.tables) {
    SCOPED_TRACE(t.spec.name());
    const uint32_t dim = t.spec.dim();
    const auto map = protocol::ShardMap::ForTable(t.spec, num_shards);
    std::vector<uint64_t> keys;
    std::vector<const float*> want;
    if (t.spec.kind() == ps::proto::EXACT) {
      for (size_t i = 0; i < t.exact.ids.size(); ++i) {
        if (!held(map.ShardOfKey(t.exact.ids[i]))) continue;
        keys.push_back(t.exact.ids[i]);
        want.push_back(t.exact.values.data() + i * dim);
      }
      if (served.tiered(t.spec.id())) {
        // At most the bound in memory, the other rows on disk.
        EXPECT_LE(served.exact_rows(t.spec.id()),
                  served.tier_stats(t.spec.id()).memory_bound);
        EXPECT_GT(served.exact_rows(t.spec.id()), 0u);
      } else {
        EXPECT_EQ(served.exact_rows(t.spec.id()), keys.size());
      }
    } else {
      // HASHED ids spread over the rows; DENSE: every row.
      const uint64_t n = t.spec.kind() == ps::proto::DENSE ? t.rows : 5000;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t key = t.spec.kind() == ps::proto::DENSE
                                 ? i
                                 : protocol::Mix64(i * 977 + 5);
        const uint64_t row = map.GlobalRow(key);
        if (!held(map.ShardOfRow(row))) continue;
        keys.push_back(key);
        want.push_back(t.values + row * dim);
      }
    }
    std::vector<float> out(keys.size() * dim);
    auto r = served.Lookup(t.spec.id(), keys, out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->checkpoint.name, served.checkpoint().name);
    EXPECT_EQ(r->missing, 0u);
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(SameBits(out.data() + i * dim, want[i], dim))
          << "key " << keys[i];
    }
  }
  // A key without a row reads as zeros and is counted.
  const uint64_t absent = 99;  // not a model key (those are Mix64 values)
  if (held(protocol::ShardMap::ForTable(model.Specs()[2], num_shards)
               .ShardOfKey(absent))) {
    std::vector<float> out(model.exact_dim, 1.0f);
    auto r = served.Lookup(kExact, std::vector<uint64_t>{absent}, out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->missing, 1u);
    EXPECT_EQ(out, std::vector<float>(model.exact_dim, 0.0f));
  }
}

// Increment at `step` over `parent`, EXACT only: `gone` keys lose their
// row, `put` keys get a row of `value`.
void WriteExactIncrement(const std::string& root, const Model& model,
                         uint64_t step, uint64_t parent, uint32_t shards,
                         std::vector<uint64_t> gone, std::vector<uint64_t> put,
                         float value) {
  std::sort(gone.begin(), gone.end());
  std::sort(put.begin(), put.end());
  const std::string dir = JoinPath(root, CheckpointDirName(step));
  const auto map = protocol::ShardMap::ForTable(model.Specs()[2], shards);
  for (uint32_t k = 0; k < shards; ++k) {
    checkpoint::ShardSnapshot snap;
    snap.step = step;
    snap.shard_id = k;
    snap.num_shards = shards;
    checkpoint::TableSnapshot t;
    t.spec = model.Specs()[2];
    t.full = false;
    t.state_arrays = 1;
    for (uint64_t key : put) {
      if (map.ShardOfKey(key) != k) continue;
      t.ids.push_back(key);
      t.values.insert(t.values.end(), model.exact_dim, value);
      t.state[0].insert(t.state[0].end(), model.exact_dim, 1.0f);
      t.last_update.push_back(step);
    }
    for (uint64_t key : gone) {
      if (map.ShardOfKey(key) == k) t.deleted.push_back(key);
    }
    snap.tables.push_back(t);
    checkpoint::ShardWriteOptions o;
    o.kind = checkpoint::proto::INCREMENTAL;
    o.parent = CheckpointDirName(parent);
    ASSERT_TRUE(checkpoint::WriteShard(dir, snap, o).ok());
  }
  checkpoint::CommitRequest c;
  c.checkpoint_dir = dir;
  c.step = step;
  c.num_shards = shards;
  c.tables = model.Specs();
  ASSERT_TRUE(checkpoint::CommitCheckpoint(c).ok());
}

// The values of `out` (ids.size() rows of `dim`) that differ from the
// model's rows `ids` (HASHED: global rows; EXACT: keys) of `table` at
// version `version` (the version every row of checkpoint `version` has).
uint64_t Mismatches(const Model& base, uint32_t table, uint64_t version,
                    const std::vector<uint64_t>& ids,
                    const std::vector<float>& out, uint32_t dim) {
  Model at = base;
  at.version = [v = static_cast<uint32_t>(version)](uint32_t, uint64_t) {
    return v;
  };
  uint64_t wrong = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (uint32_t j = 0; j < dim; ++j) {
      const float want = at.Value(table, ids[i], j, -1);
      if (!SameBits(&out[i * dim + j], &want, 1)) ++wrong;
    }
  }
  return wrong;
}

// Gives 1% of every table's rows of `model` version `version` (the others
// version 0); returns which rows those are, for an incremental checkpoint.
std::function<bool(uint32_t, uint64_t)> ChangeOnePercent(Model* model,
                                                         uint32_t version) {
  auto is_changed = [](uint32_t, uint64_t id) {
    return protocol::Mix64(id + 1) % 100 == 0;
  };
  model->version = [is_changed, version](uint32_t t, uint64_t id) {
    return is_changed(t, id) ? version : 0u;
  };
  return is_changed;
}

CheckpointFollower::PollResult PollOk(CheckpointFollower* f) {
  auto r = f->Poll();
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : CheckpointFollower::PollResult{};
}

TEST(CheckpointFollower, FollowsIncrementsTombstonesAndFullCheckpoints) {
  TempDir dir;
  Model model;
  CheckpointFollower follower(Follow(dir.path(), {}));
  EXPECT_EQ(PollOk(&follower).action, FollowAction::kNone);
  EXPECT_EQ(follower.tables(), nullptr);

  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  auto r = PollOk(&follower);
  EXPECT_EQ(r.action, FollowAction::kLoaded);
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(1)),
               model, 2);

  // 1% of every table's rows change: only they are applied.
  std::function<bool(uint32_t, uint64_t)> changed = ChangeOnePercent(&model, 1);
  ASSERT_TRUE(
      WriteCheckpoint(dir.path(), model, 2, 2, CheckpointDirName(1), &changed)
          .ok());
  r = PollOk(&follower);
  EXPECT_EQ(r.action, FollowAction::kIncremental);
  EXPECT_LT(r.rows_changed, model.hashed_capacity / 20);
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(2)),
               model, 2);

  // An EXACT key loses its row, one changes, one is new.
  WriteExactIncrement(dir.path(), model, 3, 2, 2, {model.ExactKey(0)},
                      {model.ExactKey(1), 4242}, 7.0f);
  r = PollOk(&follower);
  EXPECT_EQ(r.action, FollowAction::kIncremental);
  EXPECT_EQ(r.rows_changed, 3u);
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(3)),
               model, 2);

  // A full checkpoint: compared, only what differs applied (the changed
  // rows of version 2, the key of step 3 back, 4242 gone again).
  ChangeOnePercent(&model, 2);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 4, 2).ok());
  r = PollOk(&follower);
  EXPECT_EQ(r.action, FollowAction::kCompared);
  EXPECT_LT(r.rows_changed, model.hashed_capacity / 20);
  EXPECT_GT(r.rows_changed, 0u);
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(4)),
               model, 2);
  EXPECT_EQ(PollOk(&follower).action, FollowAction::kNone);
}

TEST(CheckpointFollower, DamagedCheckpointIsSkippedAndTheServedOneStays) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  CheckpointFollower follower(Follow(dir.path(), {}));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);

  Model next;
  next.version = [](uint32_t, uint64_t) { return 5u; };
  ASSERT_TRUE(WriteCheckpoint(dir.path(), next, 2, 2).ok());
  checkpoint::testing::CutShardShort(JoinPath(dir.path(), CheckpointDirName(2)),
                                     1);
  auto r = follower.Poll();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status();
  EXPECT_NE(r.status().message().find("skipped " + dir.path() + "/" +
                                      CheckpointDirName(2)),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("still serving " + CheckpointDirName(1)),
            std::string::npos)
      << r.status();
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(1)),
               model, 2);
  // Not tried again; the next good one is taken.
  EXPECT_EQ(PollOk(&follower).action, FollowAction::kNone);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), next, 3, 2).ok());
  EXPECT_EQ(PollOk(&follower).action, FollowAction::kCompared);
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(3)),
               next, 2);
}

TEST(CheckpointFollower, NewLayoutIsLoadedAnew) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  CheckpointFollower follower(Follow(dir.path(), {}));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 2, 3).ok());
  EXPECT_EQ(PollOk(&follower).action, FollowAction::kLoaded);
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(2)),
               model, 3);
}

TEST(CheckpointFollower, SubsetOfShards) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 3).ok());
  CheckpointFollower follower(Follow(dir.path(), {2, 0}));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);
  ExpectServes(*follower.tables(), JoinPath(dir.path(), CheckpointDirName(1)),
               model, 3, {0, 2});
  // A key of shard 1 is refused, naming the shard.
  const auto map = protocol::ShardMap::ForTable(model.Specs()[0], 3);
  uint64_t key = 0;
  while (map.Locate(key).shard != 1) ++key;
  std::vector<float> out(model.hashed_dim);
  auto r = follower.tables()->Lookup(kHashed, std::vector<uint64_t>{key}, out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("shard 1"), std::string::npos)
      << r.status();
}

TEST(CheckpointFollower, RefusesBadLookupsAndRoots) {
  TempDir dir;
  CheckpointFollower missing(Follow(dir.path() + "/nope", {}));
  EXPECT_FALSE(missing.Poll().ok());
  Model model;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 1).ok());
  CheckpointFollower too_many(Follow(dir.path(), {1}));
  auto r = too_many.Poll();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(too_many.tables(), nullptr);

  CheckpointFollower follower(Follow(dir.path(), {}));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);
  auto tables = follower.tables();
  std::vector<float> out(3);
  EXPECT_EQ(tables->Lookup(77, std::vector<uint64_t>{1}, out).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(
      tables->Lookup(kHashed, std::vector<uint64_t>{1}, out).status().code(),
      StatusCode::kInvalidArgument);  // 3 floats for a dim-8 row
  std::vector<float> dense(model.dense_dim);
  auto past = tables->Lookup(
      kDense, std::vector<uint64_t>{model.dense_capacity}, dense);
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("past the table"), std::string::npos)
      << past.status();
}

// Lookups while increments switch in: each sees one checkpoint's rows.
// Checkpoint k gives every row version k, so a lookup whose rows mix two
// checkpoints, or disagree with the one it names, is caught.
TEST(CheckpointFollower, LookupsDuringSwitchesSeeOneCheckpoint) {
  TempDir dir;
  Model model;
  model.hashed_capacity = 2003;
  model.version = [](uint32_t, uint64_t) { return 1u; };
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  CheckpointFollower follower(Follow(dir.path(), {}));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);

  std::vector<uint64_t> keys;
  std::vector<uint64_t> rows;  // the keys' global rows
  const auto map = protocol::ShardMap::ForTable(model.Specs()[0], 2);
  for (uint64_t i = 0; i < 512; ++i) {
    keys.push_back(protocol::Mix64(i));
    rows.push_back(map.GlobalRow(keys.back()));
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0}, wrong{0};
  const Model base = model;  // the readers' (the writer changes `model`)
  auto reader = [&] {
    std::vector<float> out(keys.size() * base.hashed_dim);
    while (!stop.load()) {
      auto r = follower.tables()->Lookup(kHashed, keys, out);
      if (!r.ok()) {
        wrong.fetch_add(1);
        continue;
      }
      wrong.fetch_add(Mismatches(base, kHashed, r->checkpoint.step, rows, out,
                                 base.hashed_dim));
      lookups.fetch_add(1);
    }
  };
  std::thread a(reader), b(reader);
  std::function<bool(uint32_t, uint64_t)> all = [](uint32_t, uint64_t) {
    return true;
  };
  for (uint64_t step = 2; step <= 8; ++step) {
    model.version = [step](uint32_t, uint64_t) {
      return static_cast<uint32_t>(step);
    };
    ASSERT_TRUE(WriteCheckpoint(dir.path(), model, step, 2,
                                CheckpointDirName(step - 1), &all)
                    .ok());
    EXPECT_EQ(PollOk(&follower).action, FollowAction::kIncremental);
  }
  while (lookups.load() < 20) std::this_thread::yield();
  stop = true;
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0u) << "of " << lookups.load() << " lookups";
}

// A model whose EXACT table keeps 300 rows a shard in memory and the others
// on disk, as a training cluster's tiered table does.
Model TieredModel() {
  Model model;
  model.exact_capacity = 300;
  model.exact_when_full = ps::proto::WHEN_FULL_MOVE_TO_DISK;
  return model;
}

// `n` model keys whose rows `served` holds on disk (or in memory).
std::vector<uint64_t> ModelKeys(const ServedTables& served, const Model& model,
                                size_t n, bool in_memory) {
  std::vector<uint64_t> keys;
  for (uint32_t i = 0; i < model.exact_keys && keys.size() < n; ++i) {
    const uint64_t key = model.ExactKey(i);
    if ((served.KeySlot(kExact, key) != ServedTables::kNoSlot) == in_memory) {
      keys.push_back(key);
    }
  }
  return keys;
}

TEST(CheckpointFollower, TieredTableFollowsIncrementsTombstonesAndFullOnes) {
  TempDir dir, tier;
  Model model = TieredModel();
  auto follower =
      std::make_unique<CheckpointFollower>(Follow(dir.path(), {}, tier.path()));
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  ASSERT_EQ(PollOk(follower.get()).action, FollowAction::kLoaded);
  auto served = follower->tables();
  ASSERT_TRUE(served->tiered(kExact));
  EXPECT_EQ(served->tier_stats(kExact).memory_bound, 600u);
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(1)), model, 2);
  EXPECT_GT(served->tier_stats(kExact).disk_reads, 2000u);

  // 1% of the rows change, in both tiers.
  std::function<bool(uint32_t, uint64_t)> changed = ChangeOnePercent(&model, 1);
  ASSERT_TRUE(
      WriteCheckpoint(dir.path(), model, 2, 2, CheckpointDirName(1), &changed)
          .ok());
  EXPECT_EQ(PollOk(follower.get()).action, FollowAction::kIncremental);
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(2)), model, 2);

  // Keys lose their row, change and come new, in memory and on disk.
  const auto on_disk = ModelKeys(*served, model, 2, false);
  const auto in_memory = ModelKeys(*served, model, 2, true);
  ASSERT_EQ(on_disk.size(), 2u);
  ASSERT_EQ(in_memory.size(), 2u);
  WriteExactIncrement(dir.path(), model, 3, 2, 2, {on_disk[0], in_memory[0]},
                      {on_disk[1], in_memory[1], 4242, 4243}, 7.0f);
  auto r = PollOk(follower.get());
  EXPECT_EQ(r.action, FollowAction::kIncremental);
  EXPECT_EQ(r.rows_changed, 6u);
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(3)), model, 2);

  // A full checkpoint: the rows not in memory go to a new store, which
  // replaces the old one (whose folder goes with it).
  ChangeOnePercent(&model, 2);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 4, 2).ok());
  EXPECT_EQ(PollOk(follower.get()).action, FollowAction::kCompared);
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(4)), model, 2);
  const std::string tables_dir = JoinPath(tier.path(), "tables-0");
  EXPECT_FALSE(std::filesystem::exists(JoinPath(tables_dir, "table-3.0")));
  EXPECT_TRUE(std::filesystem::exists(JoinPath(tables_dir, "table-3.1")));

  // A full checkpoint whose rows all fit in memory: the rows the disk held
  // are gone with the store (they read as zeros).
  Model small = model;
  small.exact_keys = 100;
  std::vector<uint64_t> kept;
  for (uint32_t i = 0; i < small.exact_keys; ++i) {
    kept.push_back(small.ExactKey(i));
  }
  // Read again and again, they come to stay in memory (the clock may take
  // some back out while it looks for room).
  std::vector<float> kept_rows(kept.size() * model.exact_dim);
  auto all_in_memory = [&] {
    for (uint64_t key : kept) {
      if (served->KeySlot(kExact, key) == ServedTables::kNoSlot) return false;
    }
    return true;
  };
  for (int round = 0; round < 10 && !all_in_memory(); ++round) {
    ASSERT_TRUE(served->Lookup(kExact, kept, kept_rows).ok());
    PollOk(follower.get());
  }
  ASSERT_TRUE(all_in_memory());
  std::vector<uint64_t> gone;
  for (uint32_t i = small.exact_keys; i < model.exact_keys; ++i) {
    if (served->KeySlot(kExact, model.ExactKey(i)) == ServedTables::kNoSlot) {
      gone.push_back(model.ExactKey(i));
    }
  }
  ASSERT_GT(gone.size(), 1000u);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), small, 5, 2).ok());
  EXPECT_EQ(PollOk(follower.get()).action, FollowAction::kCompared);
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(5)), small, 2);
  std::vector<float> out(gone.size() * model.exact_dim, 1.0f);
  auto lookup = served->Lookup(kExact, gone, out);
  ASSERT_TRUE(lookup.ok()) << lookup.status();
  EXPECT_EQ(lookup->missing, gone.size());
  EXPECT_EQ(out, std::vector<float>(out.size(), 0.0f));

  // The tables go, and their stores with them.
  follower.reset();
  served.reset();
  EXPECT_TRUE(std::filesystem::is_empty(tables_dir) ||
              !std::filesystem::exists(tables_dir));
}

TEST(CheckpointFollower, TieredTableBringsInTheRowsLookupsRead) {
  TempDir dir, tier;
  Model model = TieredModel();
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  CheckpointFollower follower(Follow(dir.path(), {}, tier.path()));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);
  auto served = follower.tables();
  const auto hot = ModelKeys(*served, model, 100, false);
  ASSERT_EQ(hot.size(), 100u);
  std::vector<float> out(hot.size() * model.exact_dim);
  ASSERT_TRUE(served->Lookup(kExact, hot, out).ok());
  EXPECT_EQ(served->tier_stats(kExact).disk_reads, 100u);

  // Read from disk once: remembered, not brought in (a skewed stream's
  // long tail would only push out rows read more often).
  auto r = PollOk(&follower);
  EXPECT_EQ(r.action, FollowAction::kNone);
  EXPECT_EQ(r.rows_promoted, 0u);
  // The second time, they come in.
  ASSERT_TRUE(served->Lookup(kExact, hot, out).ok());
  EXPECT_EQ(served->tier_stats(kExact).disk_reads, 200u);
  r = PollOk(&follower);
  EXPECT_EQ(r.rows_promoted, 100u);
  const auto stats = served->tier_stats(kExact);
  EXPECT_EQ(stats.promoted, 100u);
  EXPECT_EQ(stats.demoted, 100u);  // memory was full
  EXPECT_EQ(served->exact_rows(kExact), 600u);
  for (uint64_t key : hot) {
    EXPECT_NE(served->KeySlot(kExact, key), ServedTables::kNoSlot);
  }
  ASSERT_TRUE(served->Lookup(kExact, hot, out).ok());
  EXPECT_EQ(served->tier_stats(kExact).disk_reads, 200u);  // none more
  // Every row, moved or not, still reads as the checkpoint has it.
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(1)), model, 2);
}

// An increment that fails after some of its rows were written to the
// store: the served checkpoint stays whole (lookups read its view), no rows
// move, and the next full checkpoint is compared, which replaces the store.
TEST(CheckpointFollower, TieredTableRecoversFromAnIncrementThatFailsMidway) {
  TempDir dir, tier;
  Model model = TieredModel();
  model.exact_keys = 12000;  // disk rows enough for a written batch
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  CheckpointFollower follower(Follow(dir.path(), {}, tier.path()));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);
  auto served = follower.tables();

  // Two links at once; the second is damaged in shard 1, read last.
  std::function<bool(uint32_t, uint64_t)> all = [](uint32_t, uint64_t) {
    return true;
  };
  Model next = model;
  next.version = [](uint32_t, uint64_t) { return 2u; };
  ASSERT_TRUE(
      WriteCheckpoint(dir.path(), next, 2, 2, CheckpointDirName(1), &all).ok());
  ASSERT_TRUE(
      WriteCheckpoint(dir.path(), next, 3, 2, CheckpointDirName(2), &all).ok());
  checkpoint::testing::CutShardShort(JoinPath(dir.path(), CheckpointDirName(3)),
                                     1);
  auto r = follower.Poll();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(served->diverged()) << r.status();
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(1)), model, 2);
  EXPECT_EQ(PollOk(&follower).rows_promoted, 0u);  // nothing moves now

  Model full = model;
  full.version = [](uint32_t, uint64_t) { return 4u; };
  ASSERT_TRUE(WriteCheckpoint(dir.path(), full, 4, 2).ok());
  EXPECT_EQ(PollOk(&follower).action, FollowAction::kCompared);
  EXPECT_FALSE(served->diverged());
  ExpectServes(*served, JoinPath(dir.path(), CheckpointDirName(4)), full, 2);
  EXPECT_GT(PollOk(&follower).rows_promoted, 0u);  // moves again
}

// Changes a tiered table cannot take: more rows in memory than its bound
// (counted in order: a key erased and put again, then a new one), and a
// disk write of a row that is in memory.
TEST(ServedTables, TieredTableRefusesChangesBeyondItsBound) {
  TempDir tier;
  Model model = TieredModel();
  checkpoint::proto::Manifest manifest;
  manifest.set_num_shards(1);
  for (const auto& spec : model.Specs()) *manifest.add_tables() = spec;
  auto tables = ServedTables::Create(manifest, {},
                                     {.dir = tier.path(), .read_threads = 2})
                    .value();
  const std::vector<float> row(model.exact_dim, 1.0f);
  const char* values = reinterpret_cast<const char*>(row.data());
  for (uint64_t key = 1; key <= 300; ++key) {
    ASSERT_TRUE(tables->PutKey(kExact, key, values).ok());
  }
  ASSERT_TRUE(tables->Serve({"ckpt-1", 1, 0}).ok());
  ASSERT_EQ(tables->exact_rows(kExact), 300u);

  ServedChanges over;
  over.EraseKey(kExact, 1);
  over.AddKey(kExact, 1, values, model.exact_dim);
  over.AddKey(kExact, 301, values, model.exact_dim);
  auto s = tables->Apply(std::move(over), {"ckpt-2", 2, 0});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(tables->checkpoint().step, 1u);

  ServedChanges fits;
  fits.EraseKey(kExact, 1);
  fits.AddKey(kExact, 301, values, model.exact_dim);
  ASSERT_TRUE(tables->Apply(std::move(fits), {"ckpt-2", 2, 0}).ok());
  EXPECT_EQ(tables->exact_rows(kExact), 300u);

  const std::vector<std::byte> record(model.exact_dim * sizeof(float));
  const table::ColdRecordWrite in_memory{301, record};
  EXPECT_EQ(tables->WriteCold(kExact, {&in_memory, 1}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(tables->diverged());
}

TEST(CheckpointFollower, TieredTableNeedsADiskTierFolder) {
  TempDir dir;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), TieredModel(), 1, 2).ok());
  CheckpointFollower follower(Follow(dir.path()));
  auto r = follower.Poll();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--disk_tier_dir"), std::string::npos)
      << r.status();
}

// Lookups of a tiered table, from memory and disk, while increments switch
// in and rows move between the tiers: each sees one checkpoint's rows
// (checkpoint k gives every row version k).
TEST(CheckpointFollower, TieredLookupsDuringSwitchesAndMovesSeeOneCheckpoint) {
  TempDir dir, tier;
  Model model = TieredModel();
  model.version = [](uint32_t, uint64_t) { return 1u; };
  ASSERT_TRUE(WriteCheckpoint(dir.path(), model, 1, 2).ok());
  CheckpointFollower follower(Follow(dir.path(), {}, tier.path()));
  ASSERT_EQ(PollOk(&follower).action, FollowAction::kLoaded);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0}, wrong{0};
  const Model base = model;
  auto reader = [&](uint64_t seed) {
    std::vector<uint64_t> keys(64);
    std::vector<float> out(keys.size() * base.exact_dim);
    while (!stop.load()) {
      for (auto& k : keys) {
        seed = protocol::Mix64(seed);
        k = base.ExactKey(static_cast<uint32_t>(seed % base.exact_keys));
      }
      auto r = follower.tables()->Lookup(kExact, keys, out);
      if (!r.ok() || r->missing != 0) {
        wrong.fetch_add(1);
        continue;
      }
      wrong.fetch_add(Mismatches(base, kExact, r->checkpoint.step, keys, out,
                                 base.exact_dim));
      lookups.fetch_add(1);
    }
  };
  std::thread a(reader, 1), b(reader, 2);
  std::function<bool(uint32_t, uint64_t)> all = [](uint32_t, uint64_t) {
    return true;
  };
  uint64_t promoted = 0;
  for (uint64_t step = 2; step <= 8; ++step) {
    model.version = [step](uint32_t, uint64_t) {
      return static_cast<uint32_t>(step);
    };
    ASSERT_TRUE(WriteCheckpoint(dir.path(), model, step, 2,
                                CheckpointDirName(step - 1), &all)
                    .ok());
    promoted += PollOk(&follower).rows_promoted;
    EXPECT_EQ(follower.tables()->checkpoint().step, step);
    const uint64_t seen = lookups.load();
    while (lookups.load() < seen + 3) std::this_thread::yield();
    promoted += PollOk(&follower).rows_promoted;  // moves alone
  }
  stop = true;
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0u) << "of " << lookups.load() << " lookups";
  EXPECT_GT(promoted, 0u);
}

}  // namespace
}  // namespace ps::serving
