// How rows are stored in a shard's RocksDB.
//
// Key (12 bytes): table id (u32, big endian), then the global row (HASHED,
// DENSE) or the key (EXACT) as u64 big endian, so RocksDB's bytewise order is
// table order, then row order: a shard's range of a table is one contiguous
// key range, which is what resharding reads.
//
// Value, HASHED/DENSE: a run of n >= 1 consecutive rows, the key's row first
// (format 2; format 1 always wrote n = 1). Laid out array by array: the n
// rows' dim floats, then each optimizer state array's n * dim floats, so that
// restore copies each array of the run with one memcpy. n is the value's size
// over RowBytes; the writer makes runs of RowsPerRun rows (values of about
// kRunTargetBytes) where the rows are consecutive, and records that number
// in the table's ShardTableEntry (rows_per_entry), which bounds what a reader
// accepts. Why runs: restore paid RocksDB's per-entry costs (iterator step,
// key parsing and compares) and ours (key decode, checks, checksum set-up)
// once per row of a few hundred bytes, which cost more than reading the
// bytes; per run they vanish. A run of one row is byte for byte the format-1
// value, so format-1 checkpoints read the same way.
//
// Value, EXACT: one key per entry (keys are sparse, no runs): the row's dim
// floats, then each optimizer state array's dim floats, then the row's
// last-update step as u64. An EXACT tombstone (key lost its row) has an empty
// value.
//
// All floats and integers in values are little endian (native x86).
//
// Entry checksum: XXH3-64 of the value seeded with Mix64(table, id) (id: the
// key's row or key); a shard's checksum is the sum of its entries' (order
// independent).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "kernels/checksum.h"
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

// HASHED/DENSE: the bytes one row adds to a run's value.
inline size_t RowBytes(uint32_t dim, int state_arrays) {
  return ValueBytes(dim, state_arrays, /*exact=*/false);
}

// What a run's value aims at: big enough that per-entry costs vanish next to
// the bytes, small enough to sit in L2 while restore checks and copies it.
inline constexpr size_t kRunTargetBytes = 128 << 10;

// The rows of a full run: about kRunTargetBytes, at least one.
inline uint64_t RowsPerRun(uint32_t dim, int state_arrays) {
  const size_t row = RowBytes(dim, state_arrays);
  return row >= kRunTargetBytes ? 1 : kRunTargetBytes / row;
}

// EXACT: the value of one row (see above) into *value.
inline void EncodeExactValue(uint32_t dim, int state_arrays,
                             const float* values, const float* const* state,
                             uint64_t last_update, std::string* value) {
  const size_t row_bytes = size_t{dim} * sizeof(float);
  value->assign(reinterpret_cast<const char*>(values), row_bytes);
  for (int a = 0; a < state_arrays; ++a) {
    value->append(reinterpret_cast<const char*>(state[a]), row_bytes);
  }
  value->append(reinterpret_cast<const char*>(&last_update),
                sizeof last_update);
}

// EXACT: a value of ValueBytes(dim, state_arrays, true) bytes (the caller
// checked) split: its `floats` (dim * (1 + state_arrays)) into `arrays`,
// which need not share the value's alignment; returns its last update.
inline uint64_t DecodeExactValue(std::string_view value, size_t floats,
                                 float* arrays) {
  std::memcpy(arrays, value.data(), floats * sizeof(float));
  uint64_t last_update;
  std::memcpy(&last_update, value.data() + floats * sizeof(float),
              sizeof last_update);
  return last_update;
}

// Where array `array` (0: the rows' values, 1 + k: optimizer state k) of a
// run of `rows` rows starts in its value.
inline size_t RunArrayOffset(uint32_t dim, uint64_t rows, int array) {
  return size_t{dim} * 4 * rows * static_cast<size_t>(array);
}

inline uint64_t EntryChecksum(uint32_t table_id, uint64_t id,
                              std::string_view value) {
  return kernels::Xxh3Seeded(
      value.data(), value.size(),
      protocol::Mix64(id ^ protocol::Mix64(uint64_t{table_id} + 1)));
}

}  // namespace ps::checkpoint
