// AdmissionSketch: how often each key was pushed, in bounded memory, for an
// exact-key table's admission by frequency (table/exact_table.h). A
// count-min sketch: kDepth rows of 16-bit saturating counters; a push adds
// one to one counter per row (picked by independent bits of the key's
// hash), and a key's count reads as the least of its counters. Estimates
// never fall short of the true count; they exceed it only when a key shares
// its counter with other keys in every row, rare at the sizes the table
// picks (such a key may be admitted a push or two early). Counters are
// plain sums (no conservative update), so that Forget can take one key's
// pushes out again and leave the others' counts as they were (unless the
// key shared every counter, when it takes a little of theirs too).
//
// Unlike a per-key map, the memory is fixed however many distinct keys a
// stream carries. Counts age: once the sketch has counted 8 x width pushes
// since the last aging, every counter is halved (TinyLFU's reset), so a key
// must be frequent lately, not once long ago, and the counters never
// saturate in a long run. Forget(key) takes an admitted key's count out, so
// that what remains counts keys that still wait.
//
// Not thread-safe: the table partition that holds it guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ps::table {

class AdmissionSketch {
 public:
  static constexpr int kDepth = 4;
  static constexpr uint32_t kMaxCount = UINT16_MAX;

  // `width` counters per row, rounded up to a power of two (at least 64).
  explicit AdmissionSketch(uint64_t width);

  // Counts one more push of the key with hash `hash` (a well-mixed 64-bit
  // hash of the key, e.g. KeyIndex::Mix) and returns its estimated count
  // after it, saturating at kMaxCount.
  uint32_t Add(uint64_t hash);
  // The estimated count of the key with `hash`.
  uint32_t Estimate(uint64_t hash) const;
  // Takes the key's estimated count out of each of its counters (an
  // admitted key no longer waits).
  void Forget(uint64_t hash);
  // About how many distinct keys have a count now (linear counting,
  // -w ln(zeros / w), on the fullest row); exact while few keys share
  // counters.
  uint64_t EstimatedKeys() const;

  uint64_t width() const { return mask_ + 1; }
  uint64_t bytes() const { return counters_.size() * sizeof(uint16_t); }

 private:
  // The counter of row r for `hash`: 16 bits of the hash per row, remixed
  // for wider rows.
  size_t Cell(uint64_t hash, int r) const;
  void Age();

  uint64_t mask_;
  std::vector<uint16_t> counters_;  // kDepth rows of width() counters
  uint64_t added_since_aging_ = 0;
  uint64_t in_use_[kDepth] = {};  // nonzero counters per row
};

}  // namespace ps::table
