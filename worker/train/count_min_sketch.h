// CountMinSketch: approximate occurrence counts of 64-bit keys in fixed
// memory, for frequency admission (feature_admission.h), where an exact
// count of every feature value would cost as much as the values' rows.
//
// kDepth rows of `width` 16-bit counters; a key's estimate is the smallest
// of its kDepth counters (one per row, at independent hash positions).
// Updates are conservative: an occurrence raises only the key's counters
// that are below the new estimate (its old estimate + 1), so a counter
// holds at most the largest estimate of the keys that share it, not the
// sum of their counts. Counters saturate at kMaxCount.
//
// Guarantee: Estimate(key) >= min(occurrences of key counted so far,
// kMaxCount), never less, also under concurrent Add calls: the Adds of one
// key are serialised by a lock stripe chosen by the key (different keys
// proceed in parallel; their shared counters only ever rise, by atomic
// max). It over-counts when the key's counters are all shared with more
// frequent keys: rarely, when the sketch is wide against the number of
// distinct keys.
//
// Thread-safe: Add and Estimate may be called from any threads at once
// (Estimate with relaxed loads: it sees any Add that happened before it,
// and perhaps part of one that runs concurrently).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace ps::train {

class CountMinSketch {
 public:
  static constexpr uint32_t kDepth = 4;
  static constexpr uint32_t kMaxCount = 65535;
  static constexpr uint64_t kMinWidth = 64;
  static constexpr uint64_t kMaxWidth = uint64_t{1} << 30;

  // The widest width whose kDepth rows fit in `bytes` (within [kMinWidth,
  // kMaxWidth]).
  static uint64_t WidthForBytes(uint64_t bytes);

  // `width`: counters per row, rounded down to a power of two and clamped
  // to [kMinWidth, kMaxWidth].
  explicit CountMinSketch(uint64_t width);

  // Counts one occurrence of `key`; returns its estimate including it.
  uint32_t Add(uint64_t key);
  // The estimate of `key`'s occurrences so far (0: surely never counted).
  uint32_t Estimate(uint64_t key) const;

  uint64_t width() const { return width_; }
  uint64_t bytes() const { return kDepth * width_ * sizeof(uint16_t); }

 private:
  static constexpr uint32_t kStripes = 256;
  uint64_t Cell(uint32_t row, uint64_t key) const;

  const uint64_t width_;
  std::unique_ptr<std::atomic<uint16_t>[]> counters_;  // kDepth x width_
  std::unique_ptr<std::mutex[]> stripes_;
};

}  // namespace ps::train
