#include "serving/served_tables.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

#include "checkpoint/manifest_entries.h"
#include "table/key_index.h"

namespace ps::serving {
namespace {

using checkpoint::TableWhere;

}  // namespace

struct ServedTables::Table {
  ps::proto::TableSpec spec;
  protocol::ShardMap map;
  bool exact = false;
  // HASHED/DENSE: the rows of held shard s (its global rows from
  // map.FirstRow(s) on); empty for a shard not held.
  std::vector<std::vector<float>> shard_rows;
  // EXACT: key -> slot; the slots' rows (dim floats each); free slots.
  table::KeyIndex index;
  std::vector<float> rows;
  std::vector<uint32_t> free_slots;

  Table(const ps::proto::TableSpec& s, uint32_t num_shards)
      : spec(s),
        map(protocol::ShardMap::ForTable(s, num_shards)),
        exact(s.kind() == ps::proto::EXACT) {}
  uint32_t dim() const { return spec.dim(); }

  // HASHED/DENSE: global row `row`'s values; nullptr if its shard is not
  // held or it is past the table.
  float* RowAt(uint64_t row) {
    if (row >= spec.capacity()) return nullptr;
    const uint32_t s = map.ShardOfRow(row);
    if (shard_rows[s].empty()) return nullptr;
    return shard_rows[s].data() + (row - map.FirstRow(s)) * dim();
  }
  float* KeyRow(uint64_t key) { return SlotRow(index.Find(key)); }
  float* SlotRow(uint32_t slot) {
    return slot == table::KeyIndex::kNone ? nullptr
                                          : rows.data() + size_t{slot} * dim();
  }
  void Put(uint64_t key, const void* values) {
    uint32_t slot = index.Find(key);
    if (slot == table::KeyIndex::kNone) {
      if (free_slots.empty()) {
        slot = static_cast<uint32_t>(rows.size() / dim());
        rows.resize(rows.size() + dim());
      } else {
        slot = free_slots.back();
        free_slots.pop_back();
      }
      // An index that cannot grow fails like the vectors above: no memory.
      if (!index.Insert(key, slot)) throw std::bad_alloc();
    }
    std::memcpy(rows.data() + size_t{slot} * dim(), values,
                dim() * sizeof(float));
  }
  void Erase(uint64_t key) {
    const uint32_t slot = index.Find(key);
    if (slot == table::KeyIndex::kNone) return;
    free_slots.push_back(slot);
    index.Erase(key);
  }
};

void ServedChanges::AddRows(uint32_t table_id, uint64_t first_row,
                            uint64_t rows, const char* values_bytes,
                            uint32_t dim) {
  runs.push_back({table_id, first_row, rows, values.size()});
  values.resize(values.size() + rows * dim);
  std::memcpy(values.data() + runs.back().offset, values_bytes,
              rows * dim * sizeof(float));
}

void ServedChanges::AddKey(uint32_t table_id, uint64_t key,
                           const char* values_bytes, uint32_t dim) {
  keys.push_back({table_id, key, values.size(), false});
  values.resize(values.size() + dim);
  std::memcpy(values.data() + keys.back().offset, values_bytes,
              dim * sizeof(float));
}

void ServedChanges::EraseKey(uint32_t table_id, uint64_t key) {
  keys.push_back({table_id, key, 0, true});
}

uint64_t ServedChanges::rows() const {
  uint64_t n = keys.size();
  for (const Run& r : runs) n += r.rows;
  return n;
}

StatusOr<std::unique_ptr<ServedTables>> ServedTables::Create(
    const checkpoint::proto::Manifest& manifest, std::vector<uint32_t> shards) {
  const uint32_t num_shards = manifest.num_shards();
  if (shards.empty()) {
    for (uint32_t s = 0; s < num_shards; ++s) shards.push_back(s);
  }
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  if (shards.back() >= num_shards) {
    return InvalidArgument("shard " + std::to_string(shards.back()) +
                           " of a checkpoint of " + std::to_string(num_shards) +
                           " shards");
  }
  std::unique_ptr<ServedTables> t(new ServedTables());
  t->manifest_ = manifest;
  t->manifest_.clear_shards();
  t->manifest_.clear_workers();
  t->shards_ = std::move(shards);
  for (const auto& spec : manifest.tables()) {
    auto table = std::make_unique<Table>(spec, num_shards);
    table->shard_rows.resize(num_shards);
    if (!table->exact) {
      for (uint32_t s : t->shards_) {
        table->shard_rows[s].assign(table->map.RowsOf(s) * spec.dim(), 0.0f);
      }
    }
    t->tables_.push_back(std::move(table));
  }
  return t;
}

ServedTables::~ServedTables() = default;

ServedTables::Table* ServedTables::Find(uint32_t table_id) {
  for (auto& t : tables_) {
    if (t->spec.id() == table_id) return t.get();
  }
  return nullptr;
}

const ServedTables::Table* ServedTables::Find(uint32_t table_id) const {
  return const_cast<ServedTables*>(this)->Find(table_id);
}

const ps::proto::TableSpec* ServedTables::spec(uint32_t table_id) const {
  const Table* t = Find(table_id);
  return t == nullptr ? nullptr : &t->spec;
}

const ps::proto::TableSpec* ServedTables::spec(const std::string& name) const {
  for (const auto& t : tables_) {
    if (t->spec.name() == name) return &t->spec;
  }
  return nullptr;
}

bool ServedTables::holds(uint32_t shard) const {
  return std::binary_search(shards_.begin(), shards_.end(), shard);
}

bool ServedTables::SameLayout(const checkpoint::proto::Manifest& m) const {
  if (m.num_shards() != manifest_.num_shards() ||
      m.tables_size() != manifest_.tables_size()) {
    return false;
  }
  for (const auto& s : m.tables()) {
    const ps::proto::TableSpec* mine = spec(s.id());
    if (mine == nullptr || mine->kind() != s.kind() || mine->dim() != s.dim() ||
        mine->capacity() != s.capacity()) {
      return false;
    }
  }
  return true;
}

ServedCheckpoint ServedTables::checkpoint() const {
  std::shared_lock lock(mu_);
  return checkpoint_;
}

uint64_t ServedTables::bytes() const {
  std::shared_lock lock(mu_);
  uint64_t b = 0;
  for (const auto& t : tables_) {
    for (const auto& r : t->shard_rows) b += r.capacity() * sizeof(float);
    b += t->rows.capacity() * sizeof(float);
    b += t->index.bytes();
  }
  return b;
}

uint64_t ServedTables::exact_rows(uint32_t table_id) const {
  std::shared_lock lock(mu_);
  const Table* t = Find(table_id);
  return t == nullptr ? 0 : t->index.size();
}

StatusOr<ServedTables::LookupResult> ServedTables::Lookup(
    uint32_t table_id, std::span<const uint64_t> keys,
    std::span<float> out) const {
  const Table* t = Find(table_id);
  if (t == nullptr) {
    return NotFound("no table id " + std::to_string(table_id));
  }
  const uint32_t dim = t->dim();
  if (out.size() != keys.size() * dim) {
    return InvalidArgument(
        TableWhere(t->spec) + ": " + std::to_string(keys.size()) +
        " keys need " + std::to_string(keys.size() * dim) +
        " floats, the output has " + std::to_string(out.size()));
  }
  std::shared_lock lock(mu_);
  if (checkpoint_.name.empty()) {
    return NotInitialized("no checkpoint is served yet");
  }
  LookupResult r;
  r.checkpoint = checkpoint_;
  Table* table = const_cast<Table*>(t);  // the row finders do not write
  // Where each key's row is first, the index's (EXACT) or the rows' (all)
  // cache lines fetched a few keys ahead, so that the misses of a large
  // table overlap; then the copies.
  thread_local std::vector<const float*> found;
  found.resize(keys.size());
  constexpr size_t kAhead = table::KeyIndex::kPrefetchAhead;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (t->exact) {
      if (i + kAhead < keys.size()) {
        t->index.Prefetch(table::KeyIndex::Mix(keys[i + kAhead]));
      }
      const uint32_t s = t->map.ShardOfKey(keys[i]);
      if (!holds(s)) {
        return InvalidArgument(TableWhere(t->spec) + ": key " +
                               std::to_string(keys[i]) + " is shard " +
                               std::to_string(s) +
                               "'s, which this replica does not hold");
      }
      found[i] = table->KeyRow(keys[i]);
      if (found[i] == nullptr) ++r.missing;
    } else {
      const uint64_t global = t->map.GlobalRow(keys[i]);
      found[i] = table->RowAt(global);
      if (found[i] == nullptr) {
        return InvalidArgument(
            TableWhere(t->spec) + ": key " + std::to_string(keys[i]) +
            (global >= t->spec.capacity()
                 ? " is past the table's " +
                       std::to_string(t->spec.capacity()) + " rows"
                 : " is shard " + std::to_string(t->map.ShardOfRow(global)) +
                       "'s, which this replica does not hold"));
      }
    }
    if (found[i] != nullptr) __builtin_prefetch(found[i]);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (found[i] == nullptr) {
      std::fill_n(out.data() + i * dim, dim, 0.0f);
    } else {
      std::memcpy(out.data() + i * dim, found[i], dim * sizeof(float));
    }
  }
  return r;
}

const float* ServedTables::Row(uint32_t table_id, uint64_t row) const {
  Table* t = const_cast<ServedTables*>(this)->Find(table_id);
  return t == nullptr || t->exact ? nullptr : t->RowAt(row);
}

uint32_t ServedTables::KeySlot(uint32_t table_id, uint64_t key) const {
  static_assert(kNoSlot == table::KeyIndex::kNone);
  const Table* t = Find(table_id);
  return t == nullptr ? kNoSlot : t->index.Find(key);
}

const float* ServedTables::SlotRow(uint32_t table_id, uint32_t slot) const {
  Table* t = const_cast<ServedTables*>(this)->Find(table_id);
  return t == nullptr ? nullptr : t->SlotRow(slot);
}

uint32_t ServedTables::SlotCount(uint32_t table_id) const {
  const Table* t = Find(table_id);
  return t == nullptr ? 0 : static_cast<uint32_t>(t->rows.size() / t->dim());
}

void ServedTables::PrefetchKey(uint32_t table_id, uint64_t key) const {
  const Table* t = Find(table_id);
  if (t != nullptr) t->index.Prefetch(table::KeyIndex::Mix(key));
}

void ServedTables::ForEachKey(
    uint32_t table_id, const std::function<void(uint64_t, uint32_t)>& f) const {
  const Table* t = Find(table_id);
  if (t == nullptr) return;
  t->index.ForEach(f);
}

Status ServedTables::PutRows(uint32_t table_id, uint64_t first_row,
                             uint64_t rows, const char* values_bytes) {
  Table* t = Find(table_id);
  if (t == nullptr || t->exact) {
    return InvalidArgument("no HASHED/DENSE table id " +
                           std::to_string(table_id));
  }
  for (uint64_t r = 0; r < rows; ++r) {
    float* row = t->RowAt(first_row + r);
    if (row == nullptr) {
      return InvalidArgument(TableWhere(t->spec) + ": row " +
                             std::to_string(first_row + r) + " is not held");
    }
    std::memcpy(row, values_bytes + r * t->dim() * sizeof(float),
                t->dim() * sizeof(float));
  }
  return Status::OK();
}

Status ServedTables::PutKey(uint32_t table_id, uint64_t key,
                            const char* values_bytes) {
  Table* t = Find(table_id);
  if (t == nullptr || !t->exact) {
    return InvalidArgument("no EXACT table id " + std::to_string(table_id));
  }
  if (!holds(t->map.ShardOfKey(key))) {
    return InvalidArgument(TableWhere(t->spec) + ": key " +
                           std::to_string(key) + "'s shard is not held");
  }
  t->Put(key, values_bytes);
  return Status::OK();
}

void ServedTables::Serve(const ServedCheckpoint& checkpoint) {
  std::unique_lock lock(mu_);
  checkpoint_ = checkpoint;
}

Status ServedTables::CheckChange(const ServedChanges& changes) const {
  for (const auto& run : changes.runs) {
    const Table* t = Find(run.table_id);
    if (t == nullptr || t->exact) {
      return InvalidArgument("a change of rows of table id " +
                             std::to_string(run.table_id) +
                             ", which is no HASHED/DENSE table here");
    }
    Table* table = const_cast<Table*>(t);
    if (run.rows == 0 || table->RowAt(run.first_row) == nullptr ||
        table->RowAt(run.first_row + run.rows - 1) == nullptr) {
      return InvalidArgument(TableWhere(t->spec) + ": rows " +
                             std::to_string(run.first_row) + " to " +
                             std::to_string(run.first_row + run.rows - 1) +
                             " are not all held");
    }
  }
  for (const auto& k : changes.keys) {
    const Table* t = Find(k.table_id);
    if (t == nullptr || !t->exact || !holds(t->map.ShardOfKey(k.key))) {
      return InvalidArgument("a change of key " + std::to_string(k.key) +
                             " of table id " + std::to_string(k.table_id) +
                             ", which this replica does not hold");
    }
  }
  return Status::OK();
}

Status ServedTables::Apply(const ServedChanges& changes,
                           const ServedCheckpoint& to) {
  PS_RETURN_IF_ERROR(CheckChange(changes));
  // Where each change goes is found before the lock (only this writer
  // changes the index), so that lookups wait for the copies alone: the slot
  // of a key that has a row (kNone: a new key, or one this change list
  // erases first, which the lock's loop inserts).
  std::unordered_set<uint64_t> erased;
  for (const auto& k : changes.keys) {
    if (k.erase) erased.insert(k.key);
  }
  std::vector<uint32_t> slots(changes.keys.size(), table::KeyIndex::kNone);
  for (size_t i = 0; i < changes.keys.size(); ++i) {
    const auto& k = changes.keys[i];
    if (!k.erase && !erased.contains(k.key)) {
      slots[i] = Find(k.table_id)->index.Find(k.key);
    }
  }
  std::unique_lock lock(mu_);
  for (const auto& run : changes.runs) {
    Table* t = Find(run.table_id);
    for (uint64_t r = 0; r < run.rows; ++r) {
      std::memcpy(t->RowAt(run.first_row + r),
                  changes.values.data() + run.offset + r * t->dim(),
                  t->dim() * sizeof(float));
    }
  }
  for (size_t i = 0; i < changes.keys.size(); ++i) {
    const auto& k = changes.keys[i];
    Table* t = Find(k.table_id);
    const float* values = changes.values.data() + k.offset;
    if (k.erase) {
      t->Erase(k.key);
    } else if (slots[i] != table::KeyIndex::kNone) {
      std::memcpy(t->SlotRow(slots[i]), values, t->dim() * sizeof(float));
    } else {
      t->Put(k.key, values);
    }
  }
  checkpoint_ = to;
  return Status::OK();
}

}  // namespace ps::serving
