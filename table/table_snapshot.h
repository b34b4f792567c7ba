// TableSnapshot and TableTarget: a table's rows as a checkpoint saves and
// restores them (checkpoint/), and what a table hands over or takes back
// (Table::Snapshot, Table::PrepareRestore / FinishRestore in table/table.h).
// Plain value types.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/optimizers.h"
#include "protocol/ps.pb.h"

namespace ps::table {

// Rows of a snapshot that are not copied into it, because an EXACT table
// with a disk tier may hold more rows than memory: the tier, as its files
// were at the cut (table/cold_row_store.h: ColdRowFiles), which a
// checkpoint places in its folder (hard links where it can) instead of
// writing the rows again; and the rows in memory, written to a file at the
// cut (table/spilled_rows.h), which a checkpoint writes from there.
// Thread-safe.
class UncopiedRows {
 public:
  virtual ~UncopiedRows() = default;
  // fn(key, values, state arrays, last update) per row, keys ascending;
  // the pointers are valid during the call.
  using RowFn =
      std::function<void(uint64_t key, const float* values,
                         const float* const* state, uint64_t last_update)>;
  virtual Status ForEach(const RowFn& fn) const = 0;
  // Whether the files were linked at the cut, so that PlaceAt works. Where
  // the tier could not link them (a full disk cannot take RocksDB's
  // memtable), the checkpoint writes the rows instead, read with ForEach.
  virtual bool linked() const = 0;
  // ColdRowFiles::PlaceAt: the folder `dir` then holds a RocksDB database
  // of the rows, keyed by 8-byte big-endian keys, each value one disk tier
  // record (ExactPartition::ColdRecordBytes, laid out as
  // ExactPartition::ViewColdRecord reads it).
  virtual Status PlaceAt(const std::string& dir,
                         const std::vector<std::string>& earlier) const = 0;
};

// A copy of one shard's part of a table, taken at a checkpoint's cut.
struct TableSnapshot {
  ps::proto::TableSpec spec;
  // true: every row of the table on this shard; false: only what changed
  // since the parent checkpoint.
  bool full = true;
  // HASHED/DENSE: this shard's global rows [first_row, first_row + rows).
  uint64_t first_row = 0;
  uint64_t rows = 0;
  int state_arrays = 0;  // optimizer state floats per parameter (0..2)
  uint64_t optimizer_steps = 0;

  // Entries: ids[i] is a global row (HASHED/DENSE) or a key (EXACT), with
  // values[i * dim, (i + 1) * dim) and the same slice of every state array.
  // A full HASHED/DENSE table may leave ids empty: then the entries are the
  // rows first_row, first_row + 1, ... in order (no id vector to copy).
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<float> state[kernels::kMaxOptimizerStates];
  std::vector<uint64_t> last_update;  // EXACT: per entry
  std::vector<uint64_t> deleted;      // EXACT, not full: keys without a row now
  // EXACT: the table's clock (seconds, evict_after_seconds) at the cut,
  // which a restore continues from: rows kept on disk keep the second of
  // their last update.
  uint32_t clock_s = 0;
  // EXACT with a disk tier: its rows on disk, besides the entries above
  // (never the same key); null otherwise.
  std::shared_ptr<const UncopiedRows> uncopied;
  // EXACT with a disk tier whose files are linked (uncopied->linked()):
  // the rows in memory at the cut, written to a file instead of copied
  // into the entries above, which are then empty; null where they are
  // copied.
  std::shared_ptr<const UncopiedRows> spilled;

  uint32_t dim() const { return spec.dim(); }
  // Entries with values (not counting deleted keys).
  uint64_t size() const { return values.size() / (dim() ? dim() : 1); }
  uint64_t IdAt(uint64_t i) const {
    return ids.empty() ? first_row + i : ids[i];
  }
};

// Where a restore streams an EXACT table's rows that the table takes as
// they are read, not gathered in TableTarget::exact (a table with a disk
// tier: they may not fit in memory). Called from the reader's threads at
// once: thread-safe.
class RestoredRowSink {
 public:
  virtual ~RestoredRowSink() = default;
  // Every row put so far dropped: a later full checkpoint of the chain
  // replaces the rows of the earlier one.
  virtual Status Clear() = 0;
  // Before any row: the table's clock goes on from `saved_s` (the
  // checkpoint's, TableSnapshot::clock_s) where its own is behind, so that
  // rows put at the restore's second and rows adopted with their own
  // seconds read on one clock. Called again by a restore that falls back
  // to another checkpoint.
  virtual void ContinueClock(uint32_t saved_s) = 0;
  virtual Status Put(uint64_t key, const float* values,
                     const float* const* state, uint64_t last_update) = 0;
  virtual Status Delete(uint64_t key) = 0;
  // Every row put so far replaced by the rows on disk of a checkpoint
  // shard's folder (ShardTableEntry.disk_tier_path, every key of it this
  // shard's), taken as they are: their files linked into the table's disk
  // tier (ColdRowStore::Adopt) instead of each row put. The reader then
  // calls CountAdopted once per key of the folder as it reads them.
  virtual Status Adopt(const std::string& dir) = 0;
  virtual Status CountAdopted(uint64_t key) = 0;
  virtual uint64_t rows() const = 0;  // put or adopted, not deleted or cleared
};

// Where a restore puts one shard's part of a table: the checkpoint reader
// (checkpoint/restorer.h) fills what the table pointed it at.
struct TableTarget {
  ps::proto::TableSpec spec;  // must match the saved one (kind, dim, capacity)
  int state_arrays = 0;       // the optimizer state arrays the server keeps
  // HASHED/DENSE: row-major buffers for the new shard's global rows
  // [first_row, first_row + rows): rows * dim floats each (state[k] for
  // k < state_arrays).
  uint64_t first_row = 0;
  uint64_t rows = 0;
  float* values = nullptr;
  float* state[kernels::kMaxOptimizerStates] = {nullptr, nullptr};
  // Host buffers for a table whose rows cannot be written in place (a
  // device table points values and state here and uploads them): owned by
  // the target, so they go with it whether the restore finishes or not.
  std::vector<float> staged_values;
  std::vector<float> staged_state[kernels::kMaxOptimizerStates];
  // EXACT: filled with the new shard's rows, keys ascending (ids, values,
  // state, last_update); or, when the table gives a sink, streamed there.
  TableSnapshot exact;
  RestoredRowSink* exact_sink = nullptr;  // the table's
  // Out: the largest optimizer step count of the old shards.
  uint64_t optimizer_steps = 0;
  // EXACT: the latest clock of the old shards (the reader sets it first).
  uint32_t clock_s = 0;
  uint64_t rows_restored = 0;  // out
};

}  // namespace ps::table
