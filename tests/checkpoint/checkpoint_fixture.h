// Test model for the checkpoint tests: three tables (HASHED with Adam state,
// DENSE without state, EXACT with Adagrad state and last-update steps) whose
// every value is a pure function of (table, row or key, column, array,
// version), so a restored shard under any layout can be checked exactly
// against what must be there. "version" lets a test change some rows.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/restorer.h"
#include "checkpoint/shard_snapshot.h"
#include "protocol/shard_map.h"
#include "tests/temp_dir.h"

namespace ps::checkpoint::testing {

inline constexpr uint32_t kHashed = 1, kDense = 2, kExact = 3;

// A fresh directory under the test temp dir, removed at destruction.
using ::ps::testing::TempDir;

struct Model {
  uint64_t hashed_capacity = 20011;
  uint32_t hashed_dim = 8;
  uint64_t dense_capacity = 101;
  uint32_t dense_dim = 4;
  uint32_t exact_dim = 4;
  uint32_t exact_keys = 3000;
  uint64_t exact_capacity = 100000;  // rows per shard
  ps::proto::ExactWhenFull exact_when_full =
      ps::proto::WHEN_FULL_EVICT_LEAST_RECENT;
  // version(table, id): which generation of values a row holds (tests bump
  // it for the rows they "train").
  std::function<uint32_t(uint32_t table, uint64_t id)> version =
      [](uint32_t, uint64_t) { return 0u; };

  std::vector<ps::proto::TableSpec> Specs() const {
    std::vector<ps::proto::TableSpec> s(3);
    s[0].set_id(kHashed);
    s[0].set_name("emb");
    s[0].set_kind(ps::proto::HASHED);
    s[0].set_dim(hashed_dim);
    s[0].set_capacity(hashed_capacity);
    s[0].mutable_optimizer()->set_name("adam");
    s[1].set_id(kDense);
    s[1].set_name("mlp");
    s[1].set_kind(ps::proto::DENSE);
    s[1].set_dim(dense_dim);
    s[1].set_capacity(dense_capacity);
    s[1].mutable_optimizer()->set_name("sgd");
    s[2].set_id(kExact);
    s[2].set_name("ids");
    s[2].set_kind(ps::proto::EXACT);
    s[2].set_dim(exact_dim);
    s[2].set_capacity(exact_capacity);
    if (exact_when_full != ps::proto::WHEN_FULL_EVICT_LEAST_RECENT) {
      s[2].set_when_full(exact_when_full);
    }
    s[2].mutable_optimizer()->set_name("adagrad");
    return s;
  }
  static int StateArrays(uint32_t table) {
    return table == kHashed ? 2 : table == kExact ? 1 : 0;
  }
  uint64_t ExactKey(uint32_t i) const {
    return protocol::Mix64(i * 7919ull + 13);
  }
  float Value(uint32_t table, uint64_t id, uint32_t col, int array) const {
    uint64_t bits =
        protocol::Mix64((uint64_t{table} << 56) ^ (id * 31 + col) ^
                        (uint64_t{static_cast<uint32_t>(array + 1)} << 48) ^
                        (uint64_t{version(table, id)} << 40));
    // Any finite float bit pattern (exactness is checked bit for bit).
    return static_cast<float>(static_cast<int64_t>(bits >> 8)) * 1e-12f;
  }
  uint64_t LastUpdate(uint64_t key) const {
    return (key % 1000) + version(kExact, key);
  }

  void FillRow(TableSnapshot* t, uint64_t id) const {
    const uint32_t table = t->spec.id();
    for (uint32_t j = 0; j < t->dim(); ++j) {
      t->values.push_back(Value(table, id, j, -1));
    }
    for (int a = 0; a < t->state_arrays; ++a) {
      for (uint32_t j = 0; j < t->dim(); ++j) {
        t->state[a].push_back(Value(table, id, j, a));
      }
    }
    if (table == kExact) t->last_update.push_back(LastUpdate(id));
  }

  // Shard `shard` of `shards` at `step`. only_changed: keeps just the rows
  // for which changed(table, id) (an incremental snapshot).
  ShardSnapshot Snapshot(
      uint32_t shard, uint32_t shards, uint64_t step,
      const std::function<bool(uint32_t, uint64_t)>* changed = nullptr) const {
    ShardSnapshot snap;
    snap.step = step;
    snap.shard_id = shard;
    snap.num_shards = shards;
    for (const auto& spec : Specs()) {
      TableSnapshot t;
      t.spec = spec;
      t.state_arrays = StateArrays(spec.id());
      t.full = changed == nullptr;
      t.optimizer_steps = 1000 + step + shard;
      auto map = protocol::ShardMap::ForTable(spec, shards);
      if (spec.kind() == ps::proto::EXACT) {
        for (uint32_t i = 0; i < exact_keys; ++i) {
          const uint64_t key = ExactKey(i);
          if (map.ShardOfKey(key) != shard) continue;
          if (changed && !(*changed)(spec.id(), key)) continue;
          t.ids.push_back(key);
          FillRow(&t, key);
        }
      } else {
        t.first_row = map.FirstRow(shard);
        t.rows = map.RowsOf(shard);
        for (uint64_t r = t.first_row; r < t.first_row + t.rows; ++r) {
          if (changed && !(*changed)(spec.id(), r)) continue;
          if (changed) t.ids.push_back(r);
          FillRow(&t, r);
        }
      }
      snap.tables.push_back(std::move(t));
    }
    return snap;
  }

  // A restore target for shard `shard` of `shards`, buffers owned by *this
  // target holder.
  struct Target {
    RestoreTarget target;
    std::vector<std::vector<float>> buffers;
  };
  Target MakeTarget(uint32_t shard, uint32_t shards) const {
    Target t;
    t.target.shard_id = shard;
    t.target.num_shards = shards;
    t.buffers.reserve(16);
    for (const auto& spec : Specs()) {
      TableTarget tt;
      tt.spec = spec;
      tt.state_arrays = StateArrays(spec.id());
      if (spec.kind() != ps::proto::EXACT) {
        auto map = protocol::ShardMap::ForTable(spec, shards);
        tt.first_row = map.FirstRow(shard);
        tt.rows = map.RowsOf(shard);
        // NaN-filled, so a row the restore misses cannot pass.
        t.buffers.emplace_back(tt.rows * spec.dim(), std::nanf(""));
        tt.values = t.buffers.back().data();
        for (int a = 0; a < tt.state_arrays; ++a) {
          t.buffers.emplace_back(tt.rows * spec.dim(), std::nanf(""));
          tt.state[a] = t.buffers.back().data();
        }
      }
      t.target.tables.push_back(std::move(tt));
    }
    return t;
  }

  // Every row and state value of a restored target equals the model, bit
  // for bit; EXACT holds exactly the keys the shard owns.
  void ExpectRestored(const RestoreTarget& target) const {
    auto same = [](float a, float b) {
      return std::memcmp(&a, &b, sizeof(float)) == 0;
    };
    for (const TableTarget& t : target.tables) {
      const uint32_t table = t.spec.id();
      SCOPED_TRACE("table " + t.spec.name() + " shard " +
                   std::to_string(target.shard_id) + "/" +
                   std::to_string(target.num_shards));
      if (t.spec.kind() == ps::proto::EXACT) {
        auto map = protocol::ShardMap::ForTable(t.spec, target.num_shards);
        std::vector<uint64_t> want;
        for (uint32_t i = 0; i < exact_keys; ++i) {
          if (map.ShardOfKey(ExactKey(i)) == target.shard_id) {
            want.push_back(ExactKey(i));
          }
        }
        std::sort(want.begin(), want.end());
        ASSERT_EQ(t.exact.ids, want);
        ASSERT_EQ(t.exact.values.size(), want.size() * t.spec.dim());
        for (size_t i = 0; i < want.size(); ++i) {
          for (uint32_t j = 0; j < t.spec.dim(); ++j) {
            ASSERT_TRUE(same(t.exact.values[i * t.spec.dim() + j],
                             Value(table, want[i], j, -1)));
            ASSERT_TRUE(same(t.exact.state[0][i * t.spec.dim() + j],
                             Value(table, want[i], j, 0)));
          }
          ASSERT_EQ(t.exact.last_update[i], LastUpdate(want[i]));
        }
        continue;
      }
      ASSERT_EQ(t.rows_restored, t.rows);
      for (uint64_t r = 0; r < t.rows; ++r) {
        const uint64_t g = t.first_row + r;
        for (uint32_t j = 0; j < t.spec.dim(); ++j) {
          ASSERT_TRUE(
              same(t.values[r * t.spec.dim() + j], Value(table, g, j, -1)))
              << "row " << g << " col " << j;
          for (int a = 0; a < t.state_arrays; ++a) {
            ASSERT_TRUE(
                same(t.state[a][r * t.spec.dim() + j], Value(table, g, j, a)))
                << "row " << g << " state " << a;
          }
        }
      }
    }
  }
};

}  // namespace ps::checkpoint::testing

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/shard_writer.h"

namespace ps::checkpoint::testing {

// Writes every shard of `model` at `step` and commits the MANIFEST. With
// `changed`, an incremental checkpoint of those rows on top of `parent`;
// with `run_rows`, at most that many rows per entry (0: the writer's
// default).
inline StatusOr<proto::Manifest> WriteCheckpoint(
    const std::string& root, const Model& model, uint64_t step, uint32_t shards,
    const std::string& parent = "",
    const std::function<bool(uint32_t, uint64_t)>* changed = nullptr,
    uint64_t run_rows = 0) {
  const std::string dir = JoinPath(root, CheckpointDirName(step));
  for (uint32_t k = 0; k < shards; ++k) {
    ShardWriteOptions o;
    o.kind = changed ? proto::INCREMENTAL : proto::FULL;
    o.parent = parent;
    o.max_rows_per_entry = run_rows;
    auto e = WriteShard(dir, model.Snapshot(k, shards, step, changed), o);
    if (!e.ok()) return e.status();
  }
  CommitRequest c;
  c.checkpoint_dir = dir;
  c.step = step;
  c.num_shards = shards;
  c.tables = model.Specs();
  proto::WorkerPosition w;
  w.set_worker_id(0);
  w.set_step(step);
  w.set_epoch(1);
  w.set_examples_consumed(step * 100);
  c.workers.push_back(w);
  return CommitCheckpoint(c);
}

// Damages shard `shard` of the checkpoint in `checkpoint_dir`: each of its
// SST files cut to half its size (a restore or scan of it is kCorruption).
inline void CutShardShort(const std::string& checkpoint_dir, uint32_t shard) {
  for (const auto& e : std::filesystem::directory_iterator(
           JoinPath(checkpoint_dir, ShardDirName(shard)))) {
    if (e.path().extension() == ".sst") {
      std::filesystem::resize_file(e.path(), e.file_size() / 2);
    }
  }
}

// The steps of every checkpoint directory under `root`, ascending.
inline std::vector<uint64_t> Steps(const std::string& root) {
  std::vector<uint64_t> s;
  auto all = ListCheckpoints(root);
  EXPECT_TRUE(all.ok()) << all.status();
  if (!all.ok()) return s;
  for (const auto& c : *all) s.push_back(c.step);
  return s;
}

// Restores every shard of a `new_shards` layout with `readers` (0: the
// restorer's default) and checks it against the model.
inline void ExpectRestoredWith(const std::string& root, const Model& model,
                               uint32_t new_shards, int readers = 0) {
  SCOPED_TRACE(std::to_string(new_shards) + " shards, " +
               std::to_string(readers) + " readers");
  uint64_t hashed_rows = 0;
  for (uint32_t k = 0; k < new_shards; ++k) {
    auto t = model.MakeTarget(k, new_shards);
    t.target.readers = readers;
    auto r = RestoreLatest(root, {}, &t.target);
    ASSERT_TRUE(r.ok()) << r.status();
    model.ExpectRestored(t.target);
    hashed_rows += t.target.tables[0].rows_restored;
  }
  EXPECT_EQ(hashed_rows, model.hashed_capacity);
}

}  // namespace ps::checkpoint::testing
