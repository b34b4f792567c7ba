// ServedTables: the rows a serving replica answers lookups from: the values
// (no optimizer state) of the held shards of every table of one checkpoint,
// and which checkpoint that is.
//
//   auto tables = ServedTables::Create(manifest, {0, 1}).value();
//   ... fill it (Put*) before it is served, or stage ServedChanges ...
//   tables->Apply(changes, next_checkpoint);       // atomically
//   auto r = tables->Lookup(table_id, keys, out);  // r->checkpoint names it
//
// A lookup sees one checkpoint's rows, never a mix: it reads under a shared
// lock, and a new checkpoint's changes, staged beforehand without the lock
// (ServedChanges: only the rows that differ), are copied in under the
// exclusive lock, which lookups wait for only as long as that copy takes.
// Memory: the rows of the held shards (of tiered tables: those in memory),
// plus the staged rows during a switch.
//
// Tables larger than memory: an EXACT table whose spec moves rows to disk
// at its memory bound (when_full: WHEN_FULL_MOVE_TO_DISK, as the training
// servers keep it) holds at most `capacity` rows per held shard in memory
// and the others in a disk store of its own (table/cold_row_store.h, in
// DiskTier::dir), read through a pinned view of the store as of the served
// checkpoint: a new checkpoint's rows that are not in memory are written
// to the store beforehand (WriteCold, which the view does not see), and
// the switch swaps in a view pinned after them with the rows in memory, so
// a lookup that reads the disk (after releasing the lock) still sees one
// checkpoint.
// Which rows stay in memory: lookups mark the rows they read (a CLOCK bit)
// and queue the keys they read from disk; Promote (the writer's, between
// polls) brings in those read twice, moving out rows no lookup marked
// since the clock's hand last passed. A full checkpoint compared with the
// served one writes the rows not in memory into a new store, which replaces the
// old at the switch (disk, not memory, holds two copies for a while).
//
// What a lookup returns for a key: HASHED, its row (the hashing trick:
// every id has one); DENSE, row `key` (kInvalidArgument past the table);
// EXACT, the key's row, or zeros for a key the checkpoint has no row for
// (counted apart: LookupResult::missing). A key whose shard this replica
// does not hold is kInvalidArgument naming the shard.
//
// Thread-safety: Lookup from any number of threads; one writer (the
// follower) calls the Put* methods, Serve, Apply, NewColdStore and
// Promote. The Put* methods may be used only before the tables are served
// (nothing reads them yet).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "protocol/ps.pb.h"
#include "protocol/shard_map.h"
#include "table/cold_row_store.h"

namespace ps::serving {

// Where tables with a disk tier keep the rows beyond their memory bound.
struct DiskTier {
  std::string dir;        // a folder of this replica's (empty: no disk tier)
  int read_threads = 16;  // reads a lookup keeps in flight to the disk
};

// Which checkpoint rows come from.
struct ServedCheckpoint {
  std::string name;  // "ckpt-000000000120"
  uint64_t step = 0;
  int64_t created_unix_ms = 0;  // the manifest's: when it was committed
};

// The rows a new checkpoint changes, staged before the switch: HASHED/DENSE
// runs of rows by global row, EXACT rows to put or erase, applied in order.
struct ServedChanges {
  struct Run {
    uint32_t table_id;
    uint64_t first_row, rows;
    size_t offset;  // of its first float in `values`
  };
  struct Key {
    uint32_t table_id;
    uint64_t key;
    size_t offset;  // of its dim floats in `values`; unused when erased
    bool erase;
  };
  std::vector<Run> runs;
  std::vector<Key> keys;
  std::vector<float> values;
  // Tiered EXACT tables whose rows not in memory were written to a new
  // store (ServedTables::NewColdStore) that replaces the old at the switch.
  struct ColdStore {
    uint32_t table_id;
    std::unique_ptr<table::ColdRowStore> store;
  };
  std::vector<ColdStore> cold_stores;

  void AddRows(uint32_t table_id, uint64_t first_row, uint64_t rows,
               const char* values_bytes, uint32_t dim);
  void AddKey(uint32_t table_id, uint64_t key, const char* values_bytes,
              uint32_t dim);
  void EraseKey(uint32_t table_id, uint64_t key);
  bool empty() const { return runs.empty() && keys.empty(); }
  uint64_t rows() const;  // rows put or erased
};

class ServedTables {
 public:
  // Tables shaped as `manifest`'s, holding shards `shards` (each below its
  // num_shards; empty: all), the rows of tiered tables beyond memory in
  // `disk_tier.dir`/table-ID (emptied first). kInvalidArgument for a shard
  // out of range or a tiered table without a disk_tier.dir; kIOError when
  // the folder cannot be written.
  static StatusOr<std::unique_ptr<ServedTables>> Create(
      const checkpoint::proto::Manifest& manifest, std::vector<uint32_t> shards,
      const DiskTier& disk_tier = {});
  ~ServedTables();

  struct LookupResult {
    ServedCheckpoint checkpoint;
    uint64_t missing = 0;  // EXACT keys without a row (read as zeros)
  };
  // Fills `out` (keys.size() x dim floats) with the keys' rows.
  // kNotFound: no such table; kInvalidArgument: `out` of the wrong size, a
  // key of a shard not held, a DENSE key past the table; kNotInitialized:
  // nothing served yet.
  StatusOr<LookupResult> Lookup(uint32_t table_id,
                                std::span<const uint64_t> keys,
                                std::span<float> out) const;

  // The served checkpoint (empty name: none yet).
  ServedCheckpoint checkpoint() const;
  const checkpoint::proto::Manifest& manifest() const { return manifest_; }
  const std::vector<uint32_t>& shards() const { return shards_; }
  bool holds(uint32_t shard) const;
  const ps::proto::TableSpec* spec(uint32_t table_id) const;
  const ps::proto::TableSpec* spec(const std::string& name) const;
  // Whether `m` has the same tables (ids, kinds, dims, capacities, where
  // rows go when full) and number of shards, so that its rows fit these
  // tables.
  bool SameLayout(const checkpoint::proto::Manifest& m) const;
  uint64_t bytes() const;  // of the rows in memory (EXACT: with its index)
  // EXACT: the rows in memory (of a tiered table, not those on disk).
  uint64_t exact_rows(uint32_t table_id) const;

  // A tiered table's figures (all zero for other tables).
  struct TierStats {
    uint64_t memory_bound = 0;                   // rows it may keep in memory
    uint64_t disk_reads = 0;                     // keys lookups read from disk
    uint64_t promoted = 0;                       // rows moved into memory
    uint64_t demoted = 0;                        // rows moved out to make room
    uint64_t bytes_read = 0, bytes_written = 0;  // of its disk stores
  };
  bool tiered(uint32_t table_id) const;
  // Whether a store was written (WriteCold) since the last switch: ahead
  // of the served checkpoint until an Apply switches to the checkpoint the
  // writes belong to. After a failed switch, only a compared checkpoint
  // (which replaces every store) can follow; no rows move meanwhile.
  bool diverged() const;
  TierStats tier_stats(uint32_t table_id) const;

  // The writer's, read without a lock since only the writer changes rows.
  // HASHED/DENSE: the values of global row `row` (nullptr: not held).
  const float* Row(uint32_t table_id, uint64_t row) const;
  // EXACT: the slot of a key's row (kNoSlot: none), the row of a slot,
  // how many slots there are (rows and freed ones), and a hint to fetch
  // the index's cache line of a key that KeySlot will be asked for soon.
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  uint32_t KeySlot(uint32_t table_id, uint64_t key) const;
  const float* SlotRow(uint32_t table_id, uint32_t slot) const;
  uint32_t SlotCount(uint32_t table_id) const;
  void PrefetchKey(uint32_t table_id, uint64_t key) const;
  // Calls f(key, slot) for every EXACT key with a row.
  void ForEachKey(
      uint32_t table_id,
      const std::function<void(uint64_t key, uint32_t slot)>& f) const;
  // Before serving: puts rows straight in.
  Status PutRows(uint32_t table_id, uint64_t first_row, uint64_t rows,
                 const char* values_bytes);
  Status PutKey(uint32_t table_id, uint64_t key, const char* values_bytes);
  // Makes `checkpoint` the served one without changes (after Put*).
  Status Serve(const ServedCheckpoint& checkpoint);
  // Tiered table `table_id`: the rows of a new checkpoint that are not in
  // memory, written straight to its store, in order, before the Apply of
  // that checkpoint (lookups read the served view meanwhile, which does
  // not see them). kInvalidArgument for a key whose row is in memory (its
  // change is staged in ServedChanges); kIOError from the store.
  Status WriteCold(uint32_t table_id,
                   std::span<const table::ColdRecordWrite> writes);
  // Copies `changes` in and makes `to` the served checkpoint, at once for
  // lookups, with the rows written by WriteCold since the last switch.
  // Of a tiered table, changes may only be of rows in memory (and keep it
  // within its bound). kInvalidArgument (nothing applied) for a change that
  // does not fit (no such table or shard, beyond the bound).
  Status Apply(ServedChanges changes, const ServedCheckpoint& to);
  // A new, empty disk store for tiered table `table_id`, for the rows of a
  // compared checkpoint that are not in memory (ServedChanges::cold_stores).
  StatusOr<std::unique_ptr<table::ColdRowStore>> NewColdStore(
      uint32_t table_id) const;
  // Brings into memory up to `max_keys` rows per tiered table that lookups
  // read from disk twice (since the last call, or once before and once
  // since), moving out rows lookups have not read lately to make room; the
  // rows' values do not change. Returns the rows moved in.
  StatusOr<uint64_t> Promote(size_t max_keys);

 private:
  struct Table;
  ServedTables() = default;
  Table* Find(uint32_t table_id);
  const Table* Find(uint32_t table_id) const;
  // A new, empty store for tiered table `t` in disk_tier_.dir.
  StatusOr<std::unique_ptr<table::ColdRowStore>> OpenColdStore(
      const Table& t) const;
  Status CheckChange(const ServedChanges& changes) const;
  // kInvalidArgument when `changes` would keep more rows of a tiered table
  // in memory than its bound.
  Status CheckMemoryBounds(const ServedChanges& changes) const;

  checkpoint::proto::Manifest manifest_;  // specs and layout (no shards)
  std::vector<uint32_t> shards_;
  DiskTier disk_tier_;
  std::vector<std::unique_ptr<Table>> tables_;
  mutable std::shared_mutex mu_;  // lookups shared; Apply exclusive
  ServedCheckpoint checkpoint_;   // guarded by mu_
};

}  // namespace ps::serving
