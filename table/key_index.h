// KeyIndex: an exact-key table's map from key (any uint64) to row. Open
// addressing with linear probing over a power-of-two array of (key, row)
// slots kept at most 70% full; a deletion shifts the entries behind it back
// (no tombstones), so a lookup reads one or two cache lines where
// std::unordered_map chases a node pointer per key (measured: its finds
// and rehashes were about 60% of a server applying fresh EXACT keys).
// Keys are mixed before they pick a slot, so sequential or patterned ids
// spread too. Growing doubles the array and moves every entry (the caller
// is stopped meanwhile: an index that grows in the background is issue
// 39's next step).
//
// Not thread-safe: the table holds it under its own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ps::table {

class KeyIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The row of `key`, or kNone.
  uint32_t Find(uint64_t key) const;
  // Maps `key` (absent) to `row` (not kNone). False when the array cannot
  // grow (no memory): nothing changed then.
  bool Insert(uint64_t key, uint32_t row);
  // Forgets `key`; absent: nothing.
  void Erase(uint64_t key);
  // For a loop that looks up keys[0], keys[1], ... in turn: called at each
  // i, asks the CPU to load the slot where the probe of the key
  // kPrefetchAhead further starts (at i == 0, of the first ones too), so
  // the cache misses of a large index overlap instead of queuing.
  void PrefetchFor(std::span<const uint64_t> keys, size_t i) const {
    if (slots_.empty()) return;
    if (i == 0) {
      for (size_t j = 0; j < kPrefetchAhead && j < keys.size(); ++j) {
        __builtin_prefetch(&slots_[Home(keys[j])]);
      }
    }
    if (i + kPrefetchAhead < keys.size()) {
      __builtin_prefetch(&slots_[Home(keys[i + kPrefetchAhead])]);
    }
  }
  static constexpr size_t kPrefetchAhead = 16;
  size_t size() const { return size_; }

  // fn(key, row) for every entry, in no order.
  template <class Fn>
  void ForEach(Fn fn) const {
    for (const Slot& s : slots_) {
      if (s.row != kNone) fn(s.key, s.row);
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t row = kNone;  // kNone: empty
  };
  size_t Home(uint64_t key) const;
  // The slot holding `key`, or the empty slot where its probe ends.
  size_t Probe(uint64_t key) const;
  bool Grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;  // slots_.size() - 1
  size_t size_ = 0;
};

}  // namespace ps::table
