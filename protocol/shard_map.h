// ShardMap: where a key's row lives. Server and worker compute it the same
// way from the table spec and the number of shards, so a worker finds a row's
// shard and address without asking anyone.
//
// - HASHED tables (the hashing trick): global row = Mix64(key ^ seed) mod
//   capacity; shard s owns the contiguous global rows
//   [capacity * s / shards, capacity * (s + 1) / shards). Resharding moves
//   only range borders.
// - DENSE tables: the key is the global row (< capacity); same ranges.
// - EXACT tables: shard = Mix64(key ^ seed) mod shards; the shard keeps the
//   key's row in its own index, so there is no global row.
#pragma once

#include <cstdint>

#include "protocol/ps.pb.h"

namespace ps::protocol {

// A fast, well-mixed 64-bit hash (the SplitMix64 finalizer).
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

struct RowLocation {
  uint32_t shard;
  uint64_t global_row;  // HASHED/DENSE only
  uint32_t local_row;   // global_row - first row of the shard
};

class ShardMap {
 public:
  ShardMap(uint64_t capacity, uint32_t shards, proto::TableKind kind,
           uint64_t seed)
      : capacity_(capacity), shards_(shards), kind_(kind), seed_(seed) {}
  static ShardMap ForTable(const proto::TableSpec& spec, uint32_t shards) {
    return ShardMap(spec.capacity(), shards, spec.kind(), spec.id());
  }

  uint32_t shards() const { return shards_; }
  uint64_t capacity() const { return capacity_; }

  // First global row of shard s, and its row count (HASHED/DENSE).
  uint64_t FirstRow(uint32_t s) const { return capacity_ * s / shards_; }
  uint64_t RowsOf(uint32_t s) const { return FirstRow(s + 1) - FirstRow(s); }

  uint64_t GlobalRow(uint64_t key) const {
    return kind_ == proto::DENSE ? key : Mix64(key ^ seed_) % capacity_;
  }
  uint32_t ShardOfRow(uint64_t global_row) const {
    // The inverse of FirstRow: the largest s with FirstRow(s) <= row.
    uint64_t s = ((global_row + 1) * shards_ - 1) / capacity_;
    while (s + 1 < shards_ &&
           FirstRow(static_cast<uint32_t>(s + 1)) <= global_row)
      ++s;
    while (s > 0 && FirstRow(static_cast<uint32_t>(s)) > global_row) --s;
    return static_cast<uint32_t>(s);
  }
  // HASHED/DENSE: shard and local row of a key (DENSE: key < capacity).
  RowLocation Locate(uint64_t key) const {
    uint64_t row = GlobalRow(key);
    uint32_t s = ShardOfRow(row);
    return {s, row, static_cast<uint32_t>(row - FirstRow(s))};
  }
  // EXACT: the shard that keeps the key.
  uint32_t ShardOfKey(uint64_t key) const {
    return static_cast<uint32_t>(Mix64(key ^ seed_) % shards_);
  }

 private:
  uint64_t capacity_;
  uint32_t shards_;
  proto::TableKind kind_;
  uint64_t seed_;
};

}  // namespace ps::protocol
