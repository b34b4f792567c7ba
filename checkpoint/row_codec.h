// How rows are stored in a shard's RocksDB.
//
// Key (12 bytes): table id (u32, big endian), then the global row (HASHED,
// DENSE) or the key (EXACT) as u64 big endian, so RocksDB's bytewise order is
// table order, then row order: a shard's range of a table is one contiguous
// key range, which is what resharding reads.
//
// Value: the row's dim floats, then each optimizer state array's dim floats,
// then (EXACT only) the row's last-update step as u64; all little endian
// (native x86). An EXACT tombstone (key lost its row) has an empty value.
//
// Entry checksum: XXH3-64 of the value seeded with Mix64(table, id); a
// shard's checksum is the sum of its entries' (order independent).
#pragma once

// Inlined: an entry is 100s of bytes, where the call and the library's
// generic build cost as much as the hashing (restore checks every entry).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string_view>

#include "protocol/shard_map.h"

namespace ps::checkpoint {

inline constexpr size_t kKeyBytes = 12;

inline void EncodeKey(uint32_t table_id, uint64_t id, char out[kKeyBytes]) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>(table_id >> (24 - 8 * i));
  for (int i = 0; i < 8; ++i)
    out[4 + i] = static_cast<char>(id >> (56 - 8 * i));
}

// false when `key` is not 12 bytes.
inline bool DecodeKey(std::string_view key, uint32_t* table_id, uint64_t* id) {
  if (key.size() != kKeyBytes) return false;
  uint32_t t = 0;
  uint64_t v = 0;
  for (int i = 0; i < 4; ++i) t = (t << 8) | static_cast<uint8_t>(key[i]);
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(key[4 + i]);
  *table_id = t;
  *id = v;
  return true;
}

inline size_t ValueBytes(uint32_t dim, int state_arrays, bool exact) {
  return size_t{dim} * 4 * (1 + state_arrays) + (exact ? 8 : 0);
}

inline uint64_t EntryChecksum(uint32_t table_id, uint64_t id,
                              std::string_view value) {
  return XXH3_64bits_withSeed(
      value.data(), value.size(),
      protocol::Mix64(id ^ protocol::Mix64(uint64_t{table_id} + 1)));
}

}  // namespace ps::checkpoint
