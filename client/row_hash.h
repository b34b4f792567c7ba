// RowHash: the key -> global row function of one HASHED or DENSE table
// (ShardMap's mapping, protocol/shard_map.h), as a small value: a hot loop
// copies it into registers (through a reference, every store the loop makes
// could alias its fields, and the compiler would reload them per key).
// GlobalRows maps a batch of keys at once, eight at a time with AVX-512
// where the CPU has it (the same rows bit for bit: tested against the
// scalar form).
//
// Immutable: any number of threads may use one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "protocol/shard_map.h"

namespace ps::worker {

struct RowHash {
  bool dense = false;
  uint64_t capacity = 0;
  uint64_t seed = 0;
  uint64_t reciprocal = 0;  // floor((2^64 - 1) / capacity)

  // HASHED: Mix64(key ^ seed) mod capacity. DENSE: the key itself (the
  // caller checks key < capacity).
  uint64_t GlobalRow(uint64_t key) const {
    if (dense) return key;
    return FastMod(protocol::Mix64(key ^ seed));
  }
  // x mod capacity. q = floor(x * reciprocal / 2^64) falls short of
  // floor(x / c) by at most 2, so x - q * c < 3c.
  uint64_t FastMod(uint64_t x) const {
    uint64_t q = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(x) * reciprocal) >> 64);
    uint64_t r = x - q * capacity;
    if (r >= capacity) r -= capacity;
    if (r >= capacity) r -= capacity;
    return r;
  }

  // rows[i] = GlobalRow(keys[i]) for i < n.
  void GlobalRows(const uint64_t* keys, size_t n, uint64_t* rows) const;
};

}  // namespace ps::worker
