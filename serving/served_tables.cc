#include "serving/served_tables.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/manifest_entries.h"
#include "table/key_index.h"
#include "table/rocksdb_cold_row_store.h"

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

  // Tiered EXACT (cold != nullptr): at most memory_bound rows in `rows`,
  // the others in `cold`, which lookups read through cold_view (the served
  // checkpoint's; swapped under ServedTables::mu_). The writer's: the key
  // of each slot, the clock's hand, the store generation.
  std::unique_ptr<table::ColdRowStore> cold;
  std::shared_ptr<const table::ColdRowView> cold_view;
  uint64_t memory_bound = 0;
  std::vector<uint64_t> slot_keys;
  std::unique_ptr<std::atomic<uint8_t>[]> referenced;  // per slot, CLOCK
  uint32_t clock_hand = 0;
  mutable uint64_t generation = 0;  // of the stores opened
  // Keys lookups read from disk, for Promote; bounded.
  static constexpr size_t kMaxQueued = 1 << 16;
  std::mutex queued_mu;
  std::vector<uint64_t> queued;
  // Written (ServedTables::WriteCold) ahead of cold_view: the writer's.
  bool unpublished = false;
  // Keys lookups read from disk once since (Promote's; forgotten all at
  // once past memory_bound keys).
  std::unordered_set<uint64_t> read_once;
  std::atomic<uint64_t> disk_reads{0}, promoted{0}, demoted{0};
  uint64_t retired_bytes_read = 0, retired_bytes_written = 0;  // old stores

  Table(const ps::proto::TableSpec& s, uint32_t num_shards)
      : spec(s),
        map(protocol::ShardMap::ForTable(s, num_shards)),
        exact(s.kind() == ps::proto::EXACT) {}
  uint32_t dim() const { return spec.dim(); }
  size_t row_bytes() const { return dim() * sizeof(float); }
  bool tiered() const { return cold != nullptr; }

  // HASHED/DENSE: global row `row`'s values; nullptr if its shard is not
  // held or it is past the table.
  float* RowAt(uint64_t row) {
    if (row >= spec.capacity()) return nullptr;
    const uint32_t s = map.ShardOfRow(row);
    if (shard_rows[s].empty()) return nullptr;
    return shard_rows[s].data() + (row - map.FirstRow(s)) * dim();
  }
  float* SlotRow(uint32_t slot) {
    return slot == table::KeyIndex::kNone ? nullptr
                                          : rows.data() + size_t{slot} * dim();
  }
  // Whether slot `slot` holds a row (not a freed one): tiered tables only.
  bool Live(uint32_t slot) const { return index.Find(slot_keys[slot]) == slot; }
  void Put(uint64_t key, const void* values) {
    uint32_t slot = index.Find(key);
    if (slot == table::KeyIndex::kNone) {
      if (free_slots.empty()) {
        slot = static_cast<uint32_t>(rows.size() / dim());
        rows.resize(rows.size() + dim());
        if (tiered()) slot_keys.push_back(key);
      } else {
        slot = free_slots.back();
        free_slots.pop_back();
      }
      // An index that cannot grow fails like the vectors above: no memory.
      if (!index.Insert(key, slot)) throw std::bad_alloc();
      if (tiered()) {
        slot_keys[slot] = key;
        // A new row gets one pass of the clock before it may move out.
        referenced[slot].store(1, std::memory_order_relaxed);
      }
    }
    std::memcpy(rows.data() + size_t{slot} * dim(), values, row_bytes());
  }
  void Erase(uint64_t key) {
    const uint32_t slot = index.Find(key);
    if (slot == table::KeyIndex::kNone) return;
    free_slots.push_back(slot);
    index.Erase(key);
  }
  bool MemoryFull() const { return index.size() >= memory_bound; }
  void Queue(std::span<const uint64_t> keys) {
    std::lock_guard lock(queued_mu);
    const size_t n =
        std::min(keys.size(), kMaxQueued - std::min(kMaxQueued, queued.size()));
    queued.insert(queued.end(), keys.begin(),
                  keys.begin() + static_cast<long>(n));
  }
};

namespace {

std::span<const std::byte> Bytes(const void* values, size_t bytes) {
  return {static_cast<const std::byte*>(values), bytes};
}

}  // namespace

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
    const checkpoint::proto::Manifest& manifest, std::vector<uint32_t> shards,
    const DiskTier& disk_tier) {
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
  t->disk_tier_ = disk_tier;
  for (const auto& spec : manifest.tables()) {
    auto table = std::make_unique<Table>(spec, num_shards);
    table->shard_rows.resize(num_shards);
    if (!table->exact) {
      for (uint32_t s : t->shards_) {
        table->shard_rows[s].assign(table->map.RowsOf(s) * spec.dim(), 0.0f);
      }
    } else if (spec.when_full() == ps::proto::WHEN_FULL_MOVE_TO_DISK) {
      if (disk_tier.dir.empty()) {
        return InvalidArgument(
            TableWhere(spec) +
            " keeps the rows beyond its memory bound on disk (when_full: "
            "WHEN_FULL_MOVE_TO_DISK): a replica needs a disk tier folder for "
            "it (ps_serve --disk_tier_dir)");
      }
      // The same bound as the training servers': capacity rows a shard.
      table->memory_bound = spec.capacity() * t->shards_.size();
      if (table->memory_bound == 0 ||
          table->memory_bound >= table::KeyIndex::kNone) {
        return InvalidArgument(TableWhere(spec) + ": a memory bound of " +
                               std::to_string(table->memory_bound) +
                               " rows cannot be served");
      }
      table->referenced.reset(new std::atomic<uint8_t>[table->memory_bound]());
      // Address space only: the pages are touched as rows come in.
      table->rows.reserve(table->memory_bound * spec.dim());
      PS_ASSIGN_OR_RETURN(table->cold, t->OpenColdStore(*table));
    }
    t->tables_.push_back(std::move(table));
  }
  return t;
}

ServedTables::~ServedTables() = default;

StatusOr<std::unique_ptr<table::ColdRowStore>> ServedTables::OpenColdStore(
    const Table& t) const {
  return table::RocksDbColdRowStore::Open(
      disk_tier_.dir + "/table-" + std::to_string(t.spec.id()) + "." +
          std::to_string(t.generation++),
      t.row_bytes(), disk_tier_.read_threads);
}

StatusOr<std::unique_ptr<table::ColdRowStore>> ServedTables::NewColdStore(
    uint32_t table_id) const {
  const Table* t = Find(table_id);
  if (t == nullptr || !t->tiered()) {
    return InvalidArgument("no tiered table id " + std::to_string(table_id));
  }
  return OpenColdStore(*t);
}

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
        mine->capacity() != s.capacity() ||
        mine->when_full() != s.when_full()) {
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
    // A tiered table's reserve is address space until rows come in.
    b += (t->tiered() ? t->rows.size() : t->rows.capacity()) * sizeof(float);
    b += t->index.bytes();
    b += t->slot_keys.capacity() * sizeof(uint64_t) + t->memory_bound;
  }
  return b;
}

bool ServedTables::tiered(uint32_t table_id) const {
  const Table* t = Find(table_id);
  return t != nullptr && t->tiered();
}

ServedTables::TierStats ServedTables::tier_stats(uint32_t table_id) const {
  std::shared_lock lock(mu_);
  const Table* t = Find(table_id);
  if (t == nullptr || !t->tiered()) return {};
  return {.memory_bound = t->memory_bound,
          .disk_reads = t->disk_reads.load(std::memory_order_relaxed),
          .promoted = t->promoted.load(std::memory_order_relaxed),
          .demoted = t->demoted.load(std::memory_order_relaxed),
          .bytes_read = t->retired_bytes_read + t->cold->bytes_read(),
          .bytes_written = t->retired_bytes_written + t->cold->bytes_written()};
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
  thread_local std::vector<size_t> on_disk;  // tiered: keys not in memory
  found.resize(keys.size());
  on_disk.clear();
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
      const uint32_t slot = t->index.Find(keys[i]);
      found[i] = table->SlotRow(slot);
      if (t->tiered()) {
        if (found[i] == nullptr) {
          on_disk.push_back(i);
        } else if (!t->referenced[slot].load(std::memory_order_relaxed)) {
          t->referenced[slot].store(1, std::memory_order_relaxed);
        }
      } else if (found[i] == nullptr) {
        ++r.missing;
      }
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
  if (on_disk.empty()) return r;
  // The rows on disk, read without the lock through the view of the
  // checkpoint whose memory rows were just copied: a switch meanwhile
  // changes neither.
  const std::shared_ptr<const table::ColdRowView> view = t->cold_view;
  lock.unlock();
  thread_local std::vector<uint64_t> disk_keys;
  thread_local std::vector<std::byte> records;
  thread_local std::vector<uint8_t> on;
  disk_keys.clear();
  for (size_t i : on_disk) disk_keys.push_back(keys[i]);
  records.resize(disk_keys.size() * t->row_bytes());
  on.assign(disk_keys.size(), 0);
  PS_RETURN_IF_ERROR(view->GetMany(disk_keys, records, on));
  table->disk_reads.fetch_add(disk_keys.size(), std::memory_order_relaxed);
  size_t read = 0;
  for (size_t j = 0; j < on_disk.size(); ++j) {
    if (!on[j]) {
      ++r.missing;
      continue;
    }
    std::memcpy(out.data() + on_disk[j] * dim,
                records.data() + j * t->row_bytes(), t->row_bytes());
    disk_keys[read++] = disk_keys[j];
  }
  table->Queue(std::span<const uint64_t>(disk_keys.data(), read));
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
  if (t->tiered() && t->MemoryFull() &&
      t->index.Find(key) == table::KeyIndex::kNone) {
    return t->cold->Put(key, Bytes(values_bytes, t->row_bytes()));
  }
  t->Put(key, values_bytes);
  return Status::OK();
}

Status ServedTables::Serve(const ServedCheckpoint& checkpoint) {
  std::vector<std::shared_ptr<const table::ColdRowView>> views;
  for (const auto& t : tables_) {
    std::shared_ptr<const table::ColdRowView> view;
    if (t->tiered()) {
      PS_ASSIGN_OR_RETURN(view, t->cold->Pin());
    }
    views.push_back(std::move(view));
  }
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (views[i]) tables_[i]->cold_view = std::move(views[i]);
  }
  checkpoint_ = checkpoint;
  return Status::OK();
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
  for (const auto& c : changes.cold_stores) {
    if (!tiered(c.table_id) || c.store == nullptr) {
      return InvalidArgument("a disk store for table id " +
                             std::to_string(c.table_id) +
                             ", which has no disk tier here");
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

Status ServedTables::WriteCold(uint32_t table_id,
                               std::span<const table::ColdRecordWrite> writes) {
  Table* t = Find(table_id);
  if (t == nullptr || !t->tiered()) {
    return InvalidArgument("no tiered table id " + std::to_string(table_id));
  }
  for (const auto& w : writes) {
    if (t->index.Find(w.key) != table::KeyIndex::kNone) {
      return InvalidArgument(TableWhere(t->spec) + ": key " +
                             std::to_string(w.key) +
                             " has its row in memory, not on disk");
    }
  }
  // Ahead of the served view from here until Apply publishes it.
  t->unpublished = true;
  return t->cold->Write(writes);
}

bool ServedTables::diverged() const {
  for (const auto& t : tables_) {
    if (t->unpublished) return true;
  }
  return false;
}

Status ServedTables::CheckMemoryBounds(const ServedChanges& changes) const {
  // Each tiered table's rows in memory as the changes are applied in
  // order (a put of a key not there takes a row, an erase of one there
  // frees it), against its bound at every step.
  struct Count {
    int64_t rows;
    std::unordered_map<uint64_t, bool> in_memory;  // keys changed so far
  };
  std::unordered_map<uint32_t, Count> counts;
  for (const auto& k : changes.keys) {
    const Table* t = Find(k.table_id);
    if (!t->tiered()) continue;
    auto [it, fresh] = counts.try_emplace(k.table_id);
    Count& c = it->second;
    if (fresh) c.rows = static_cast<int64_t>(t->index.size());
    auto [state, first] = c.in_memory.try_emplace(k.key, false);
    if (first) state->second = t->index.Find(k.key) != table::KeyIndex::kNone;
    if (k.erase && state->second) --c.rows;
    if (!k.erase && !state->second) ++c.rows;
    state->second = !k.erase;
    if (c.rows > static_cast<int64_t>(t->memory_bound)) {
      return InvalidArgument(TableWhere(t->spec) +
                             ": the changes would keep more rows in memory "
                             "than its bound of " +
                             std::to_string(t->memory_bound));
    }
  }
  return Status::OK();
}

Status ServedTables::Apply(ServedChanges changes, const ServedCheckpoint& to) {
  PS_RETURN_IF_ERROR(CheckChange(changes));
  PS_RETURN_IF_ERROR(CheckMemoryBounds(changes));
  // Tiered tables: the view of each store written since the last switch
  // (WriteCold) or replaced, pinned after those writes, for the lock.
  std::vector<std::shared_ptr<const table::ColdRowView>> views(tables_.size());
  std::vector<std::unique_ptr<table::ColdRowStore>> replacements(
      tables_.size());
  for (size_t i = 0; i < tables_.size(); ++i) {
    Table* t = tables_[i].get();
    if (!t->tiered()) continue;
    for (auto& c : changes.cold_stores) {
      if (c.table_id == t->spec.id()) replacements[i] = std::move(c.store);
    }
    table::ColdRowStore* store =
        replacements[i] ? replacements[i].get() : t->cold.get();
    if (replacements[i] || t->unpublished) {
      PS_ASSIGN_OR_RETURN(views[i], store->Pin());
    }
  }
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
  for (size_t i = 0; i < tables_.size(); ++i) {
    Table* t = tables_[i].get();
    if (replacements[i]) {
      t->retired_bytes_read += t->cold->bytes_read();
      t->retired_bytes_written += t->cold->bytes_written();
      std::swap(t->cold, replacements[i]);  // the old one closes below
    }
    if (views[i]) {
      t->cold_view = std::move(views[i]);
      // Published (a replacement holds the compared checkpoint's rows
      // whole: what was written ahead of the old view went with it).
      t->unpublished = false;
    }
  }
  checkpoint_ = to;
  return Status::OK();
}

StatusOr<uint64_t> ServedTables::Promote(size_t max_keys) {
  if (diverged()) return 0;  // a view pinned now would not be served rows
  uint64_t promoted = 0;
  for (auto& owned : tables_) {
    Table* t = owned.get();
    if (!t->tiered()) continue;
    std::vector<uint64_t> keys;
    {
      std::lock_guard lock(t->queued_mu);
      keys.swap(t->queued);
    }
    // A key comes in the second time lookups read it from disk: keys read
    // once, the long tail of a skewed stream, would push out rows read
    // more often, and each move is a write and a delete the store must
    // compact away (promoting every key read: 143 Zipf lookups/s of a 10^7
    // key table, 215 this way).
    std::sort(keys.begin(), keys.end());
    size_t admitted = 0;
    for (size_t i = 0; i < keys.size();) {
      size_t j = i + 1;
      while (j < keys.size() && keys[j] == keys[i]) ++j;
      const uint64_t key = keys[i];
      const bool twice = j - i >= 2 || t->read_once.erase(key) == 1;
      if (t->index.Find(key) == table::KeyIndex::kNone) {
        if (twice) {
          keys[admitted++] = key;
        } else {
          t->read_once.insert(key);
        }
      }
      i = j;
    }
    keys.resize(admitted);
    if (t->read_once.size() > t->memory_bound) t->read_once.clear();
    if (keys.size() > max_keys) keys.resize(max_keys);
    if (keys.empty()) continue;
    // Their rows as served (the served view is the store as it is: only
    // this writer changes it, and pins a view after each change).
    const size_t rb = t->row_bytes();
    std::vector<std::byte> records(keys.size() * rb);
    std::vector<uint8_t> found(keys.size());
    PS_RETURN_IF_ERROR(t->cold_view->GetMany(keys, records, found));
    size_t n = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!found[i]) continue;  // gone since (a switch erased it)
      keys[n] = keys[i];
      std::memmove(records.data() + n * rb, records.data() + i * rb, rb);
      ++n;
    }
    keys.resize(n);
    // Room first, then rows the clock's hand finds unread since it last
    // passed (it clears the marks it passes).
    const uint64_t room = t->memory_bound - t->index.size();
    const size_t need = keys.size() > room ? keys.size() - room : 0;
    const uint32_t slots = static_cast<uint32_t>(t->rows.size() / t->dim());
    std::vector<uint32_t> victims;
    for (uint64_t step = 0; victims.size() < need && step < 2 * uint64_t{slots};
         ++step) {
      const uint32_t s = t->clock_hand;
      t->clock_hand = s + 1 == slots ? 0 : s + 1;
      if (!t->Live(s)) continue;
      if (t->referenced[s].load(std::memory_order_relaxed)) {
        t->referenced[s].store(0, std::memory_order_relaxed);
        continue;
      }
      t->referenced[s].store(1, std::memory_order_relaxed);  // chosen once
      victims.push_back(s);
    }
    keys.resize(std::min<size_t>(keys.size(), room + victims.size()));
    if (keys.empty()) continue;
    std::vector<table::ColdRecordWrite> batch;
    for (uint32_t v : victims) {
      batch.push_back({t->slot_keys[v], Bytes(t->SlotRow(v), rb)});
    }
    for (uint64_t key : keys) batch.push_back({key, {}});
    PS_RETURN_IF_ERROR(t->cold->Write(batch));
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const table::ColdRowView> view,
                        t->cold->Pin());
    std::unique_lock lock(mu_);
    for (uint32_t v : victims) t->Erase(t->slot_keys[v]);
    for (size_t i = 0; i < keys.size(); ++i) {
      t->Put(keys[i], records.data() + i * rb);
    }
    t->cold_view = std::move(view);
    lock.unlock();
    t->promoted.fetch_add(keys.size(), std::memory_order_relaxed);
    t->demoted.fetch_add(victims.size(), std::memory_order_relaxed);
    promoted += keys.size();
  }
  return promoted;
}

}  // namespace ps::serving
