// DistinctKeys: the distinct keys of a batch, in order of first appearance,
// and for every key its index among them: what a trainer pulls (each row
// once) and how it finds a feature's row again. Open addressing over a
// power-of-two table of (index + 1), 0 meaning empty; O(1) per key.
//
//   std::vector<uint32_t> table;            // scratch, reused per batch
//   DistinctKeys d(ids.size(), &table, &keys);
//   for (j ...) slot[j] = d.Insert(ids[j]);
//
// Not thread-safe: one per thread (the table is its scratch memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "protocol/shard_map.h"

namespace ps::worker {

class DistinctKeys {
 public:
  // Room for `n` distinct keys; *keys is cleared and receives them.
  DistinctKeys(size_t n, std::vector<uint32_t>* table,
               std::vector<uint64_t>* keys)
      : table_(*table), keys_(*keys) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    table_.assign(cap, 0);
    mask_ = cap - 1;
    keys_.clear();
  }

  // The index of `key` among the distinct keys, added if it is new. At most
  // the `n` keys of the constructor may be distinct.
  uint32_t Insert(uint64_t key) {
    size_t h = protocol::Mix64(key) & mask_;
    while (true) {
      uint32_t e = table_[h];
      if (e == 0) {
        keys_.push_back(key);
        table_[h] = static_cast<uint32_t>(keys_.size());
        return static_cast<uint32_t>(keys_.size() - 1);
      }
      if (keys_[e - 1] == key) return e - 1;
      h = (h + 1) & mask_;
    }
  }

 private:
  std::vector<uint32_t>& table_;
  std::vector<uint64_t>& keys_;
  size_t mask_ = 0;
};

}  // namespace ps::worker
