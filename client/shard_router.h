// ShardRouter: which shard, and which row of it, a key of one table goes to.
// It is ShardMap's key -> (shard, local row) mapping made fast for hot loops
// over millions of keys: it gives exactly ShardMap's answers (tested against
// it) but replaces the 64-bit division of `hash % capacity` by a multiply
// with a precomputed reciprocal and at most two corrections, and finds the
// shard of a row by comparing with the (few) shard borders.
//
// Immutable after construction: any number of threads may use it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "client/row_hash.h"
#include "client/row_plan.h"
#include "protocol/ps.pb.h"
#include "protocol/shard_map.h"

namespace ps::worker {

class ShardRouter {
 public:
  ShardRouter(const proto::TableSpec& spec, uint32_t shards)
      : map_(protocol::ShardMap::ForTable(spec, shards)),
        hash_{spec.kind() == proto::DENSE, spec.capacity(), spec.id(),
              spec.capacity() == 0 ? 0 : UINT64_MAX / spec.capacity()} {
    for (uint32_t s = 0; s <= shards; ++s)
      first_row_.push_back(map_.FirstRow(s));
  }

  const protocol::ShardMap& map() const { return map_; }
  uint32_t shards() const { return map_.shards(); }
  uint64_t capacity() const { return hash_.capacity; }
  bool dense() const { return hash_.dense; }
  const RowHash& row_hash() const { return hash_; }
  // DENSE tables: kInvalidArgument for a key past the table's rows (named
  // `table` in the message); other kinds take any key.
  Status CheckDenseKeys(std::span<const uint64_t> keys,
                        const std::string& table) const {
    if (!hash_.dense) return Status::OK();
    for (uint64_t k : keys) {
      if (k >= hash_.capacity) {
        return InvalidArgument("key " + std::to_string(k) + " of DENSE table " +
                               table + " is past its " +
                               std::to_string(hash_.capacity) + " rows");
      }
    }
    return Status::OK();
  }
  uint64_t FirstRow(uint32_t s) const { return first_row_[s]; }
  uint64_t RowsOf(uint32_t s) const {
    return first_row_[s + 1] - first_row_[s];
  }

  // RowHash::GlobalRow.
  uint64_t GlobalRow(uint64_t key) const { return hash_.GlobalRow(key); }

  // The shard owning `global_row` (< capacity).
  uint32_t ShardOfRow(uint64_t global_row) const {
    const uint32_t n = shards();
    if (n <= 16) {
      uint32_t s = 0;
      for (uint32_t i = 1; i < n; ++i) s += global_row >= first_row_[i];
      return s;
    }
    return map_.ShardOfRow(global_row);
  }

  // Clears `pairs` (one vector per shard) and appends, for key i, the packed
  // (local row, i) pair (row_plan.h) to its shard's vector, in key order.
  void SplitByShard(std::span<const uint64_t> keys,
                    std::vector<std::vector<uint64_t>>* pairs) const {
    pairs->resize(shards());
    for (auto& p : *pairs) p.clear();
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint64_t row = GlobalRow(keys[i]);
      const uint32_t s = ShardOfRow(row);
      (*pairs)[s].push_back(
          PackRowIndex(static_cast<uint32_t>(row - first_row_[s]),
                       static_cast<uint32_t>(i)));
    }
  }

 private:
  protocol::ShardMap map_;
  RowHash hash_;
  std::vector<uint64_t> first_row_;
};

}  // namespace ps::worker
