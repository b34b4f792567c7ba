#include "checkpoint/restorer.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include "checkpoint/rocksdb_options.h"
#include "checkpoint/row_codec.h"
#include "protocol/shard_map.h"

namespace ps::checkpoint {
namespace {

std::string Parent(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

std::string TableWhere(const ps::proto::TableSpec& s) {
  return "table '" + s.name() + "' (id " + std::to_string(s.id()) + ")";
}

const proto::ShardTableEntry* FindEntry(const proto::ShardEntry& shard,
                                        uint32_t table_id) {
  for (const auto& t : shard.tables()) {
    if (t.table_id() == table_id) return &t;
  }
  return nullptr;
}

const ps::proto::TableSpec* FindSpec(const proto::Manifest& m, uint32_t id) {
  for (const auto& t : m.tables()) {
    if (t.id() == id) return &t;
  }
  return nullptr;
}

// Called per entry of a scan; value empty for an EXACT tombstone.
using EntryFn = std::function<Status(const ps::proto::TableSpec& spec,
                                     const proto::ShardTableEntry& entry,
                                     uint64_t id, std::string_view value)>;

// Scans one shard database whole: every entry is checked (key, table, value
// size) and fed to `fn`; the count and checksum must match the manifest.
Status ScanShard(const std::string& checkpoint_path, const proto::Manifest& m,
                 const proto::ShardEntry& shard, const EntryFn& fn,
                 uint64_t* bytes_read) {
  const std::string dir = JoinPath(checkpoint_path, shard.path());
  const std::string where = "checkpoint " + checkpoint_path + " shard " +
                            std::to_string(shard.shard_id()) + " (" + dir + ")";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Corruption(where + ": the shard's database is missing");
  }
  rocksdb::Options options = CheckpointDbOptions();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, dir, &raw);
  if (!s.ok()) {
    return Corruption(where + ": cannot open the database: " + s.ToString());
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(CheckpointScanOptions()));
  uint64_t count = 0, checksum = 0;
  std::unordered_map<uint32_t, std::pair<const ps::proto::TableSpec*,
                                         const proto::ShardTableEntry*>>
      tables;
  for (const auto& e : shard.tables()) {
    const ps::proto::TableSpec* spec = FindSpec(m, e.table_id());
    if (spec == nullptr) {
      return Corruption(where + ": table id " + std::to_string(e.table_id()) +
                        " is not in the manifest's tables");
    }
    tables[e.table_id()] = {spec, &e};
  }
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key(), v = it->value();
    uint32_t table_id;
    uint64_t id;
    if (!DecodeKey(std::string_view(k.data(), k.size()), &table_id, &id)) {
      return Corruption(where + ": a key of " + std::to_string(k.size()) +
                        " bytes (12 expected)");
    }
    auto t = tables.find(table_id);
    if (t == tables.end()) {
      return Corruption(where + ": an entry of table id " +
                        std::to_string(table_id) +
                        " that the shard's manifest entry does not list");
    }
    const auto& [spec, entry] = t->second;
    const bool exact = spec->kind() == ps::proto::EXACT;
    const size_t want =
        ValueBytes(spec->dim(), static_cast<int>(entry->state_arrays()), exact);
    if (v.size() != want && !(exact && v.size() == 0 && !entry->full())) {
      return Corruption(where + ": " + TableWhere(*spec) + " id " +
                        std::to_string(id) + " has a value of " +
                        std::to_string(v.size()) + " bytes, " +
                        std::to_string(want) + " expected");
    }
    const std::string_view value(v.data(), v.size());
    checksum += EntryChecksum(table_id, id, value);
    ++count;
    *bytes_read += k.size() + v.size();
    if (fn) PS_RETURN_IF_ERROR(fn(*spec, *entry, id, value));
  }
  if (!it->status().ok()) {
    return Corruption(where + ": " + it->status().ToString());
  }
  if (count != shard.entries()) {
    return Corruption(where + ": " + std::to_string(count) +
                      " entries, the manifest records " +
                      std::to_string(shard.entries()));
  }
  if (checksum != shard.checksum()) {
    return Corruption(where + ": checksum mismatch over " +
                      std::to_string(count) +
                      " entries (a row or its state was altered)");
  }
  return Status::OK();
}

struct ExactRow {
  std::vector<float> data;  // values, state arrays
  uint64_t last_update = 0;
};

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

  // EXACT rows of the new shard, by key.
  std::unordered_map<uint32_t, std::map<uint64_t, ExactRow>> exact_rows;
  // HASHED/DENSE rows restored from the checkpoint where the table was last
  // full (every row must come from there).
  std::unordered_map<uint32_t, uint64_t> full_rows;

  for (const CheckpointInfo& c : chain) {
    const proto::Manifest& m = c.manifest;
    const uint32_t old_shards = m.num_shards();
    for (auto& [id, t] : targets) {
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
      }
    }
    for (uint32_t k = 0; k < old_shards; ++k) {
      const proto::ShardEntry& shard = m.shards(static_cast<int>(k));
      // Does new shard target->shard_id need anything from old shard k?
      bool needed = false;
      for (auto& [id, t] : targets) {
        if (FindEntry(shard, id) == nullptr) continue;
        if (t->spec.kind() == ps::proto::EXACT) {
          needed = true;
          continue;
        }
        const protocol::ShardMap old_map(t->spec.capacity(), old_shards,
                                         t->spec.kind(), t->spec.id());
        const uint64_t a = old_map.FirstRow(k), b = a + old_map.RowsOf(k);
        if (a < t->first_row + t->rows && t->first_row < b) needed = true;
      }
      if (!needed) continue;
      EntryFn fn = [&](const ps::proto::TableSpec& spec,
                       const proto::ShardTableEntry& entry, uint64_t id,
                       std::string_view value) -> Status {
        auto ti = targets.find(spec.id());
        if (ti == targets.end()) return Status::OK();
        TableTarget* t = ti->second;
        const size_t row_bytes = size_t{spec.dim()} * sizeof(float);
        if (spec.kind() == ps::proto::EXACT) {
          const protocol::ShardMap new_map(1, target->num_shards, spec.kind(),
                                           spec.id());
          if (new_map.ShardOfKey(id) != target->shard_id) return Status::OK();
          t->optimizer_steps =
              std::max(t->optimizer_steps, entry.optimizer_steps());
          auto& rows = exact_rows[spec.id()];
          if (value.empty()) {
            rows.erase(id);
            return Status::OK();
          }
          ExactRow& row = rows[id];
          const size_t floats = size_t{spec.dim()} * (1 + t->state_arrays);
          row.data.resize(floats);
          std::memcpy(row.data.data(), value.data(), floats * sizeof(float));
          std::memcpy(&row.last_update, value.data() + floats * sizeof(float),
                      8);
          return Status::OK();
        }
        if (id < t->first_row || id >= t->first_row + t->rows) {
          return Status::OK();
        }
        t->optimizer_steps =
            std::max(t->optimizer_steps, entry.optimizer_steps());
        const uint64_t local = id - t->first_row;
        const char* p = value.data();
        std::memcpy(t->values + local * spec.dim(), p, row_bytes);
        p += row_bytes;
        for (int s = 0; s < t->state_arrays; ++s) {
          if (t->state[s] != nullptr) {
            std::memcpy(t->state[s] + local * spec.dim(), p, row_bytes);
          }
          p += row_bytes;
        }
        if (entry.full()) ++full_rows[spec.id()];
        return Status::OK();
      };
      PS_RETURN_IF_ERROR(ScanShard(c.path, m, shard, fn, &result.bytes_read));
    }
  }

  for (auto& [id, t] : targets) {
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
    PS_RETURN_IF_ERROR(ScanShard(checkpoint_path, m, shard, nullptr, &bytes));
  }
  return m;
}

}  // namespace ps::checkpoint
