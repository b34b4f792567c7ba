// KeyIndex: a map from key (any uint64) to row for tables that keep no key
// beside each row (serving replicas: serving/served_tables.cc; an EXACT
// table's partitions keep theirs and use RowIndex, table/row_index.h).
// Open addressing with linear probing over a power-of-two array of 12-byte
// (key, row) slots kept at most 70% full (or another bound the owner gives,
// see the constructor); a deletion shifts the entries behind it back (no
// tombstones), so a lookup reads one or two cache lines where
// std::unordered_map chases a node pointer per key (measured: its finds
// and rehashes were about 60% of a server applying fresh EXACT keys).
// Keys are mixed before they pick a slot (Mix), so sequential or
// patterned ids spread too. The hash's high bits pick the slot (below the
// bits an owner uses to pick the index, see the constructor): slots are in
// hash order, so keys that come in hash order (a worker's push:
// protocol/key_hash.h) read and fill the array from one end to the other,
// a stream, where keys in any other order read it at random. Growing
// doubles the array and moves every entry; the caller is stopped
// meanwhile, which is why an ExactTable keeps one index per partition
// (table/exact_partition.h): a growth stops one partition's keys, not the
// table. (Growing by 1.5 instead was measured: at 20M keys it saved less
// memory than it cost in inserts.)
//
// Not thread-safe: the table holds it under its own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/huge_pages.h"
#include "protocol/key_hash.h"

namespace ps::table {

class KeyIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Grows (doubles) when an insert would fill more than max_load_percent
  // (in [50, 90]) of the slots. `owner_bits` (< 32): the top bits of Mix
  // that the owner picks this index by (ExactTable's partition), the same
  // for all its keys: the slot comes from the bits below them.
  explicit KeyIndex(uint32_t max_load_percent = 70, int owner_bits = 0)
      : max_load_percent_(max_load_percent), owner_bits_(owner_bits) {}

  // protocol::KeyHash: every key bit moves every bit of the hash, and the
  // order of hashes is the order workers send keys in.
  static uint64_t Mix(uint64_t k) { return protocol::KeyHash(k); }

  // The row of `key`, or kNone. `hash` is Mix(key), for a caller that
  // computed it already (ExactTable picks partitions by it).
  uint32_t Find(uint64_t key) const { return Find(key, Mix(key)); }
  uint32_t Find(uint64_t key, uint64_t hash) const {
    return slots_.empty() ? kNone : slots_[Probe(key, hash)].row;
  }
  // Maps `key` (absent) to `row` (not kNone). False when the array cannot
  // grow (no memory): nothing changed then.
  bool Insert(uint64_t key, uint32_t row);
  // Forgets `key`; absent: nothing.
  void Erase(uint64_t key);
  // Asks the CPU to load the slot where the probe of a key starts: a loop
  // over many keys calls it kPrefetchAhead keys ahead, so that the cache
  // misses of a large index overlap instead of queuing.
  static constexpr size_t kPrefetchAhead = 16;
  // `hash` is Mix(key).
  void Prefetch(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[HomeOf(hash)]);
  }
  size_t size() const { return size_; }
  size_t bytes() const { return slots_.capacity() * sizeof(Slot); }

  // fn(key, row) for every entry, in no order.
  template <class Fn>
  void ForEach(Fn fn) const {
    for (const Slot& s : slots_) {
      if (s.row != kNone) fn(s.key, s.row);
    }
  }

 private:
  // Packed: 12 bytes, not 16 (a quarter of the index's memory: 110M keys of
  // dim 8 took 60 bytes a row beyond the row, not 69); x86 reads the
  // unaligned key as fast, but two slots in sixteen cross a cache line (a
  // resident push of 10M keys measured about 7% slower end to end).
  struct __attribute__((packed)) Slot {
    uint64_t key = 0;
    uint32_t row = kNone;  // kNone: empty
  };
  static_assert(sizeof(Slot) == 12);

  // The slot where the probe of the key whose Mix is `hash` starts: the
  // bits below the owner's, as many as the array needs (slots_ not empty).
  size_t HomeOf(uint64_t hash) const {
    return (hash << owner_bits_) >> home_shift_;
  }
  size_t Home(uint64_t key) const { return HomeOf(Mix(key)); }
  // The slot holding `key` (whose Mix is `hash`), or the empty slot where
  // its probe ends.
  size_t Probe(uint64_t key, uint64_t hash) const {
    size_t i = HomeOf(hash);
    while (slots_[i].row != kNone && slots_[i].key != key) i = (i + 1) & mask_;
    return i;
  }
  // Doubles the array (to `slots` at least); false without memory.
  bool Grow(size_t slots = 0);

  // On huge pages (base/huge_pages.h): a lookup of keys in no order reads
  // a random slot.
  using Slots = std::vector<Slot, HugePageAllocator<Slot>>;

  uint32_t max_load_percent_;
  int owner_bits_;
  Slots slots_;
  size_t mask_ = 0;      // slots_.size() - 1
  int home_shift_ = 64;  // 64 - log2(slots_.size())
  size_t size_ = 0;
};

}  // namespace ps::table
