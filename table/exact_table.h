// ExactTable: one shard of an EXACT table, for key spaces too large or too
// open for the hashing trick. The shard keeps its own key -> row index
// (table/key_index.h: open addressing, prefetched a few keys ahead):
//
// - Admission: a key gets a row at its admit_after_pushes-th push (counted
//   per key occurrence); the gradients of earlier pushes are dropped and
//   counted. Rare keys, most of a CTR key space, so never take memory.
// - Optimizer steps: one per ApplyKeys call, i.e. per keyed packet (a push
//   of many keys may span packets), as HASHED tables count per packet when
//   they do not fold steps.
// - Eviction by age: every push carries the worker's step; a row whose last
//   update is more than evict_after_steps older than the step of a push is
//   freed (checked on pushes, oldest-updated rows first, so a push costs
//   O(rows it evicts), not O(rows)).
// - Memory bound: at most `capacity` rows (TableSpec.capacity is per shard
//   for EXACT tables). Reaching it is logged once, clearly; from then on new
//   keys are not admitted (counted) until eviction frees rows.
//
// Rows live in local memory, not in registered memory: workers reach exact
// rows only through the server (RowAccess::kThroughServer), because only
// the server knows where a key's row is. Pushes arrive as keyed packets in
// the inboxes (the apply threads call ApplyKeys), pulls as ExactPull
// requests on the control channel (ReadKeys). Storage grows with the rows
// in use, up to the bound.
//
// ExactTable is a Table (table/table.h): ApplyKeys and ReadKeys; its
// checkpoints are its keys with their rows, state and last update.
//
// Thread-safe: one mutex per table; apply threads and control connections
// call in.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "protocol/ps.pb.h"
#include "table/key_index.h"
#include "table/optimizer_state.h"
#include "table/table.h"

namespace ps::table {

class ExactTable final : public Table {
 public:
  // kInvalidArgument for a spec that is not a valid EXACT table.
  static StatusOr<std::unique_ptr<ExactTable>> Create(
      const proto::TableSpec& spec);

  RowAccess access() const override { return RowAccess::kThroughServer; }

  // Applies keys.size() gradients (values: keys.size() * dim floats) through
  // the table's optimizer, admitting and evicting as described above.
  // kInvalidArgument for a size mismatch or a non-finite value (nothing is
  // applied then).
  Status ApplyKeys(uint64_t step, std::span<const uint64_t> keys,
                   std::span<const float> values) override;
  // Copies each key's row into out (keys.size() * dim floats); keys without
  // a row read as zeros and present[i] = false.
  Status ReadKeys(std::span<const uint64_t> keys, std::span<float> out,
                  std::span<bool> present) const override;

  bool HasRow(uint64_t key) const;
  TableCounters counters() const override;
  // The bound: capacity rows with their state.
  uint64_t bytes() const override;
  std::string Placement() const override;

  // Every key with its row, state and last update (ids in no order).
  Status Snapshot(TableSnapshot* out) const override;
  // The reader fills target->exact (keys ascending).
  Status PrepareRestore(TableTarget* target) override;
  // Replaces every row with target->exact's, oldest update first.
  // kResourceExhausted when they exceed the capacity.
  Status FinishRestore(TableTarget* target) override;

 private:
  static constexpr uint32_t kNoRow = UINT32_MAX;

  explicit ExactTable(const proto::TableSpec& spec);

  // All below: mu_ held.
  uint32_t AllocateRow(uint64_t key);  // kNoRow when full
  void FreeRow(uint32_t row);
  void Touch(uint32_t row, uint64_t step);  // moves to the newest end
  void Unlink(uint32_t row);
  void EvictOlderThan(uint64_t step);
  void FreeAllRows();  // empty again (before a restore), counters kept

  const uint32_t dim_;
  const uint64_t capacity_;
  // Pending admission counts are bounded too (a stream of distinct keys must
  // not grow memory without end); beyond the bound new keys wait.
  const size_t max_pending_;

  mutable std::mutex mu_;
  KeyIndex row_of_key_;
  std::unordered_map<uint64_t, uint32_t> pending_;  // key -> pushes so far
  std::vector<float> values_;                       // rows_allocated * dim
  OptimizerState optimizer_;  // its arrays: rows_allocated * dim each
  std::vector<uint64_t> key_of_row_;
  std::vector<uint64_t> last_update_;
  // Doubly linked list of rows in use, least recently updated first.
  std::vector<uint32_t> prev_, next_;
  uint32_t oldest_ = kNoRow, newest_ = kNoRow;
  std::vector<uint32_t> free_rows_;
  bool logged_full_ = false;
  bool logged_pending_full_ = false;
  TableCounters counters_;
  // Scratch for one Push (reused, so steady pushes do not allocate).
  std::vector<uint32_t> apply_rows_;
  std::vector<float> apply_grads_;
};

}  // namespace ps::table
