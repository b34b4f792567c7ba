#include "checkpoint/restorer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <unordered_map>

#include "checkpoint/manifest_entries.h"
#include "checkpoint/row_codec.h"
#include "checkpoint/shard_scan.h"
#include "protocol/shard_map.h"

namespace ps::checkpoint {
namespace {

std::string Parent(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

const ps::proto::TableSpec* FindSpec(const proto::Manifest& m, uint32_t id) {
  for (const auto& t : m.tables()) {
    if (t.id() == id) return &t;
  }
  return nullptr;
}

struct ExactRow {
  std::vector<float> data;  // values, state arrays
  uint64_t last_update = 0;
};

// What one key range of an old shard gives the new shard. HASHED/DENSE runs
// of rows are copied straight from RocksDB's block into the target's
// buffers, one memcpy per array of a run (the ranges are disjoint, so are
// the rows they write); EXACT entries of the new shard are kept in key
// order, in one flat buffer, and applied after the readers join, range by
// range, as a single reader would have. Counters are per range, merged
// after.
class RestoreSink : public EntrySink {
 public:
  struct PerTable {
    TableTarget* target = nullptr;
    protocol::ShardMap new_map;  // EXACT: whose key is whose
    uint64_t full_rows = 0;
    uint64_t optimizer_steps = 0;
  };
  struct ExactEntry {
    uint32_t table_id;
    uint64_t key;
    size_t offset;   // into exact_bytes_
    bool tombstone;  // the key has no row any more
  };

  // `adopted`: the tables whose rows on disk in this shard the targets'
  // sinks adopted (RestoredRowSink::Adopt): their entries on disk are
  // counted, not put.
  RestoreSink(const RestoreTarget& target,
              const std::unordered_map<uint32_t, TableTarget*>& targets,
              const std::set<uint32_t>* adopted)
      : shard_id_(target.shard_id), adopted_(adopted) {
    for (const auto& [id, t] : targets) {
      tables_.emplace(id, PerTable{t,
                                   protocol::ShardMap(1, target.num_shards,
                                                      t->spec.kind(), id),
                                   0, 0});
    }
  }

  Status Add(const ScanTable& table, uint64_t id, uint64_t rows,
             std::string_view value) override {
    if (&table != last_table_) {
      last_table_ = &table;
      auto it = tables_.find(table.spec->id());
      current_ = it == tables_.end() ? nullptr : &it->second;
    }
    if (current_ == nullptr) return Status::OK();  // not restored here
    PerTable& p = *current_;
    const TableTarget& t = *p.target;
    // The scan checked the value against the state arrays its shard's
    // manifest entry records; the copy below uses the server's count.
    const size_t want =
        rows * ValueBytes(table.spec->dim(), t.state_arrays, table.exact);
    if (value.size() != want && !(table.exact && value.empty())) {
      return Corruption("table id " + std::to_string(table.spec->id()) +
                        " id " + std::to_string(id) + ": a value of " +
                        std::to_string(value.size()) + " bytes, " +
                        std::to_string(want) + " for " + std::to_string(rows) +
                        " rows and " + std::to_string(t.state_arrays) +
                        " optimizer state arrays");
    }
    if (table.exact) {
      if (p.new_map.ShardOfKey(id) != shard_id_) return Status::OK();
      p.optimizer_steps =
          std::max(p.optimizer_steps, table.entry->optimizer_steps());
      if (t.exact_sink != nullptr) return Stream(t, id, value);
      exact_.push_back(
          {table.spec->id(), id, exact_bytes_.size(), value.empty()});
      exact_bytes_.append(value);
      return Status::OK();
    }
    // The run's rows that are the new shard's: all, some (a run cut by the
    // new layout's shard boundary) or none.
    const uint64_t lo = std::max(id, t.first_row);
    const uint64_t hi = std::min(id + rows, t.first_row + t.rows);
    if (lo >= hi) return Status::OK();
    p.optimizer_steps =
        std::max(p.optimizer_steps, table.entry->optimizer_steps());
    const uint32_t dim = table.spec->dim();
    const size_t bytes = (hi - lo) * dim * sizeof(float);
    const size_t skip = (lo - id) * dim * sizeof(float);
    const size_t into = (lo - t.first_row) * dim;
    std::memcpy(t.values + into,
                value.data() + RunArrayOffset(dim, rows, 0) + skip, bytes);
    for (int s = 0; s < t.state_arrays; ++s) {
      if (t.state[s] == nullptr) continue;
      std::memcpy(t.state[s] + into,
                  value.data() + RunArrayOffset(dim, rows, 1 + s) + skip,
                  bytes);
    }
    if (table.entry->full()) p.full_rows += hi - lo;
    return Status::OK();
  }

  Status AddFromDisk(const ScanTable& table, uint64_t id,
                     std::string_view value) override {
    if (adopted_->count(table.spec->id()) == 0) {
      return Add(table, id, 1, value);
    }
    PerTable& p = tables_.at(table.spec->id());
    if (p.new_map.ShardOfKey(id) != shard_id_) {
      return Corruption(TableWhere(*table.spec) + " key " + std::to_string(id) +
                        " lies on disk in shard " + std::to_string(shard_id_) +
                        "'s part, not its own");
    }
    p.optimizer_steps =
        std::max(p.optimizer_steps, table.entry->optimizer_steps());
    return p.target->exact_sink->CountAdopted(id);
  }

  // After the scan: counters into the targets and `full_rows`, EXACT
  // entries into `exact_rows`. Call for the ranges in key order.
  void MergeInto(
      std::unordered_map<uint32_t, uint64_t>* full_rows,
      std::unordered_map<uint32_t, std::map<uint64_t, ExactRow>>* exact_rows) {
    for (auto& [id, p] : tables_) {
      p.target->optimizer_steps =
          std::max(p.target->optimizer_steps, p.optimizer_steps);
      if (p.full_rows > 0) (*full_rows)[id] += p.full_rows;
    }
    for (const ExactEntry& e : exact_) {
      auto& rows = (*exact_rows)[e.table_id];
      if (e.tombstone) {
        rows.erase(e.key);
        continue;
      }
      const TableTarget& t = *tables_.at(e.table_id).target;
      const size_t floats = size_t{t.spec.dim()} * (1 + t.state_arrays);
      ExactRow& row = rows[e.key];
      row.data.resize(floats);
      row.last_update =
          DecodeExactValue(std::string_view(exact_bytes_).substr(e.offset),
                           floats, row.data.data());
    }
  }

 private:
  // An EXACT entry straight into the table's sink (the value checked).
  static Status Stream(const TableTarget& t, uint64_t key,
                       std::string_view value) {
    if (value.empty()) return t.exact_sink->Delete(key);
    const size_t dim = t.spec.dim();
    // RocksDB's block need not be 4-byte aligned: copied first.
    std::vector<float> row(dim * (1 + t.state_arrays));
    const uint64_t last_update =
        DecodeExactValue(value, row.size(), row.data());
    const float* state[kernels::kMaxOptimizerStates] = {};
    for (int s = 0; s < t.state_arrays; ++s) {
      state[s] = row.data() + dim * (1 + s);
    }
    return t.exact_sink->Put(key, row.data(), state, last_update);
  }

  const uint32_t shard_id_;
  const std::set<uint32_t>* const adopted_;
  std::unordered_map<uint32_t, PerTable> tables_;
  const ScanTable* last_table_ = nullptr;
  PerTable* current_ = nullptr;
  std::vector<ExactEntry> exact_;
  std::string exact_bytes_;
};

// The most seconds a saved table clock may read (about 34 years of
// training): a table's clock is a u32 that must not wrap.
constexpr uint32_t kMaxClockSeconds = uint32_t{1} << 30;

int ReadersOf(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(
      std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
}

}  // namespace

StatusOr<std::vector<CheckpointInfo>> ResolveChain(
    const std::string& checkpoint_path) {
  std::vector<CheckpointInfo> chain;
  std::string path = checkpoint_path;
  for (int depth = 0;; ++depth) {
    if (depth > 10000) return Corruption(checkpoint_path + ": parent cycle");
    CheckpointInfo info;
    info.path = path;
    info.name = std::filesystem::path(path).filename().string();
    auto m = ReadManifest(path);
    if (!m.ok()) {
      if (m.status().Is(StatusCode::kNotFound)) {
        return NotFound(
            path + " is not a complete checkpoint (no MANIFEST: interrupted)" +
            (depth > 0 ? ", but " + checkpoint_path + " depends on it" : ""));
      }
      return m.status();
    }
    info.complete = true;
    info.step = m->step();
    info.manifest = std::move(*m);
    const std::string parent = info.manifest.parent();
    const bool incremental = info.manifest.kind() == proto::INCREMENTAL;
    chain.insert(chain.begin(), std::move(info));
    if (!incremental) break;
    if (parent.empty()) {
      return Corruption(path + "/MANIFEST: incremental without a parent");
    }
    path = JoinPath(Parent(path), parent);
  }
  for (const auto& c : chain) {
    if (c.manifest.num_shards() != chain.back().manifest.num_shards()) {
      return Corruption(c.path + ": a different number of shards than " +
                        chain.back().path + " in the same chain");
    }
  }
  return chain;
}

StatusOr<RestoreResult> RestoreShard(const std::string& checkpoint_path,
                                     RestoreTarget* target) {
  RestoreResult result;
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> chain,
                      ResolveChain(checkpoint_path));
  const proto::Manifest& last = chain.back().manifest;
  result.path = checkpoint_path;
  result.manifest = last;
  for (const auto& c : chain) result.chain.push_back(c.path);

  // Check the target against the saved specs.
  std::unordered_map<uint32_t, TableTarget*> targets;
  for (TableTarget& t : target->tables) {
    const ps::proto::TableSpec* saved = FindSpec(last, t.spec.id());
    if (saved == nullptr) {
      return NotFound(checkpoint_path + " has no " + TableWhere(t.spec));
    }
    if (saved->kind() != t.spec.kind() || saved->dim() != t.spec.dim() ||
        (saved->kind() != ps::proto::EXACT &&
         saved->capacity() != t.spec.capacity())) {
      return InvalidArgument(TableWhere(t.spec) + ": saved as kind " +
                             std::to_string(saved->kind()) + " dim " +
                             std::to_string(saved->dim()) + " capacity " +
                             std::to_string(saved->capacity()) + ", now kind " +
                             std::to_string(t.spec.kind()) + " dim " +
                             std::to_string(t.spec.dim()) + " capacity " +
                             std::to_string(t.spec.capacity()) +
                             ": cannot restore");
    }
    t.optimizer_steps = 0;
    t.rows_restored = 0;
    t.exact = TableSnapshot();
    t.exact.spec = t.spec;
    t.exact.state_arrays = t.state_arrays;
    targets[t.spec.id()] = &t;
  }

  // EXACT tables continue their clock from the latest cut, before any row
  // is restored.
  for (auto& [id, t] : targets) {
    if (t->spec.kind() != ps::proto::EXACT) continue;
    for (const auto& shard : last.shards()) {
      const auto* e = FindEntry(shard, id);
      if (e == nullptr) continue;
      if (e->clock_seconds() > kMaxClockSeconds) {
        return Corruption(checkpoint_path + ": " + TableWhere(t->spec) +
                          " was saved at a clock of " +
                          std::to_string(e->clock_seconds()) +
                          " seconds, past the most a table counts (" +
                          std::to_string(kMaxClockSeconds) + ")");
      }
      t->clock_s = std::max(t->clock_s, e->clock_seconds());
    }
    if (t->exact_sink != nullptr) t->exact_sink->ContinueClock(t->clock_s);
  }

  // EXACT rows of the new shard, by key.
  std::unordered_map<uint32_t, std::map<uint64_t, ExactRow>> exact_rows;
  // HASHED/DENSE rows restored from the checkpoint where the table was last
  // full (every row must come from there).
  std::unordered_map<uint32_t, uint64_t> full_rows;

  // Each table starts over at the last checkpoint of the chain where it is
  // full (its base): the links before are not read for it. (EXACT tables
  // are full in every checkpoint, so only the last is read for them.)
  std::unordered_map<uint32_t, size_t> base;
  for (size_t j = 0; j < chain.size(); ++j) {
    for (const auto& [id, t] : targets) {
      const proto::ShardTableEntry* e0 =
          FindEntry(chain[j].manifest.shards(0), id);
      if (e0 != nullptr && e0->full()) base[id] = j;
    }
  }
  for (size_t j = 0; j < chain.size(); ++j) {
    const CheckpointInfo& c = chain[j];
    const proto::Manifest& m = c.manifest;
    const uint32_t old_shards = m.num_shards();
    // Same layout: every row of the new shard is in the old shard of its
    // number, and only there.
    const bool same_layout = old_shards == target->num_shards;
    std::unordered_map<uint32_t, TableTarget*> active;
    for (const auto& [id, t] : targets) {
      if (base[id] <= j) active.emplace(id, t);
    }
    for (auto& [id, t] : active) {
      // The table's state arrays and fullness, from the first shard.
      const proto::ShardTableEntry* e0 = FindEntry(m.shards(0), id);
      if (e0 == nullptr) {
        if (c.manifest.kind() == proto::FULL) {
          return Corruption(c.path + ": " + TableWhere(t->spec) +
                            " is missing from shard 0");
        }
        continue;
      }
      if (static_cast<int>(e0->state_arrays()) != t->state_arrays) {
        return InvalidArgument(
            c.path + ": " + TableWhere(t->spec) + " was saved with " +
            std::to_string(e0->state_arrays()) +
            " optimizer state arrays, the server keeps " +
            std::to_string(t->state_arrays) + " (optimizer changed?)");
      }
      if (e0->full()) {
        exact_rows[id].clear();
        full_rows[id] = 0;
        if (t->exact_sink != nullptr) {
          PS_RETURN_IF_ERROR(t->exact_sink->Clear().WithContext(
              "restoring " + TableWhere(t->spec)));
        }
      }
    }
    // Rows on disk of this shard in the same layout are adopted: their
    // files linked, not each row written. Only at the name the writer
    // gives (ScanShard refuses any other) and with the server's state
    // arrays (the records' size).
    std::set<uint32_t> adopted_here;
    if (same_layout && target->shard_id < old_shards) {
      const uint32_t k = target->shard_id;
      const proto::ShardEntry& shard = m.shards(static_cast<int>(k));
      for (auto& [id, t] : active) {
        const proto::ShardTableEntry* e = FindEntry(shard, id);
        if (t->exact_sink == nullptr || e == nullptr || !e->full() ||
            e->disk_tier_path() != ShardDiskTierName(k, id) ||
            static_cast<int>(e->state_arrays()) != t->state_arrays) {
          continue;
        }
        PS_RETURN_IF_ERROR(
            t->exact_sink->Adopt(JoinPath(c.path, e->disk_tier_path())));
        adopted_here.insert(id);
      }
    }
    for (uint32_t k = 0; k < old_shards; ++k) {
      const proto::ShardEntry& shard = m.shards(static_cast<int>(k));
      // Does new shard target->shard_id need anything from old shard k?
      bool needed = false;
      for (auto& [id, t] : active) {
        if (FindEntry(shard, id) == nullptr) continue;
        if (t->spec.kind() == ps::proto::EXACT) {
          needed |= !same_layout || k == target->shard_id;
          continue;
        }
        const protocol::ShardMap old_map(t->spec.capacity(), old_shards,
                                         t->spec.kind(), t->spec.id());
        const uint64_t a = old_map.FirstRow(k), b = a + old_map.RowsOf(k);
        if (a < t->first_row + t->rows && t->first_row < b) needed = true;
      }
      if (!needed) continue;
      const std::set<uint32_t> none;
      const std::set<uint32_t>& adopted =
          k == target->shard_id ? adopted_here : none;
      std::vector<std::unique_ptr<RestoreSink>> sinks;
      auto make_sink = [&](size_t) -> EntrySink* {
        sinks.push_back(
            std::make_unique<RestoreSink>(*target, active, &adopted));
        return sinks.back().get();
      };
      PS_RETURN_IF_ERROR(ScanShard(c.path, m, shard,
                                   {.readers = ReadersOf(target->readers)},
                                   make_sink, &result.bytes_read));
      for (auto& sink : sinks) sink->MergeInto(&full_rows, &exact_rows);
    }
  }

  for (auto& [id, t] : targets) {
    if (t->exact_sink != nullptr) {
      t->rows_restored = t->exact_sink->rows();
      continue;
    }
    if (t->spec.kind() == ps::proto::EXACT) {
      auto& rows = exact_rows[id];
      const size_t dim = t->spec.dim();
      for (int s = 0; s < t->state_arrays; ++s) {
        t->exact.state[s].reserve(rows.size() * dim);
      }
      t->exact.values.reserve(rows.size() * dim);
      for (const auto& [key, row] : rows) {
        t->exact.ids.push_back(key);
        t->exact.values.insert(t->exact.values.end(), row.data.begin(),
                               row.data.begin() + dim);
        for (int s = 0; s < t->state_arrays; ++s) {
          t->exact.state[s].insert(t->exact.state[s].end(),
                                   row.data.begin() + dim * (1 + s),
                                   row.data.begin() + dim * (2 + s));
        }
        t->exact.last_update.push_back(row.last_update);
      }
      t->rows_restored = rows.size();
      continue;
    }
    t->rows_restored = full_rows[id];
    if (t->rows_restored != t->rows) {
      return Corruption(checkpoint_path + ": " + TableWhere(t->spec) +
                        " restored " + std::to_string(t->rows_restored) +
                        " of the " + std::to_string(t->rows) +
                        " rows of shard " + std::to_string(target->shard_id) +
                        " (rows missing from the full base)");
    }
  }
  return result;
}

StatusOr<RestoreResult> RestoreLatest(const std::string& root,
                                      const RestoreLatestOptions& options,
                                      RestoreTarget* target) {
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, ListCheckpoints(root));
  std::vector<std::string> skipped;
  Status first_error;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (!it->complete && it->manifest_status.Is(StatusCode::kNotFound)) {
      // Interrupted before its MANIFEST was renamed into place: it never
      // existed as a checkpoint.
      skipped.push_back(it->path + ": incomplete (no MANIFEST)");
      continue;
    }
    // A MANIFEST that exists but does not read back is damage, not an
    // interruption (the rename is atomic): an error unless told to fall back.
    auto r = it->complete ? RestoreShard(it->path, target)
                          : StatusOr<RestoreResult>(it->manifest_status);
    if (r.ok()) {
      r->skipped = std::move(skipped);
      return r;
    }
    if (!options.fallback) return r.status();
    if (first_error.ok()) first_error = r.status();
    skipped.push_back(it->path + ": " + r.status().ToString());
  }
  if (!first_error.ok()) {
    std::string all_errors;
    for (const auto& s : skipped) all_errors += "\n  " + s;
    return Status(first_error.code(), "no complete checkpoint under " + root +
                                          " could be restored:" + all_errors);
  }
  return NotFound("no complete checkpoint under " + root);
}

StatusOr<proto::Manifest> VerifyCheckpoint(const std::string& checkpoint_path) {
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> chain,
                      ResolveChain(checkpoint_path));
  const proto::Manifest& m = chain.back().manifest;
  uint64_t bytes = 0;
  for (const auto& shard : m.shards()) {
    PS_RETURN_IF_ERROR(ScanShard(checkpoint_path, m, shard,
                                 {.readers = ReadersOf(0)}, nullptr, &bytes));
  }
  return m;
}

}  // namespace ps::checkpoint
