// CountMinSketch: approximate occurrence counts of 64-bit keys in fixed
// memory, for frequency admission (feature_admission.h), where an exact
// count of every feature value would cost as much as the values' rows.
//
// kDepth rows of `width` 16-bit counters; a key's estimate is the smallest
// of its kDepth counters (one per row). Updates are conservative: an
// occurrence raises only the key's counters that are below the new
// estimate (its old estimate + 1), so a counter holds at most the largest
// estimate of the keys that share it, not the sum of their counts.
// Counters saturate at kMaxCount.
//
// Layout: the counters are cut into 64-byte blocks, each holding kGroup
// counters of every row; a key's kDepth counters lie in one block (chosen
// by one hash), at independent positions within their rows' groups (by
// another). One cache miss per key instead of kDepth: counting runs once
// per feature of every example, and memory latency is its whole cost. Keys
// collide only within a block, which holds few keys when the sketch is
// wide against the distinct keys (the accuracy of a plain sketch of
// kGroup-counter rows per block, over many blocks).
//
// Guarantee: Estimate(key) >= min(occurrences of key counted so far,
// kMaxCount), never less, also under concurrent Add calls: the Adds of one
// key are serialised by a lock stripe chosen by the key (different keys
// proceed in parallel; their shared counters only ever rise, by atomic
// max). It over-counts when the key's counters are all shared with more
// frequent keys: rarely, when the sketch is wide against the number of
// distinct keys.
//
// Thread-safe: Add, Estimate and Prefetch may be called from any threads at
// once (Estimate with relaxed loads: it sees any Add that happened before
// it, and perhaps part of one that runs concurrently).
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
  // Counters of one row in a block: kDepth x kGroup x 2 bytes = 64 bytes.
  static constexpr uint32_t kGroup = 8;
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
  // Starts loading `key`'s counters (call a few keys ahead).
  void Prefetch(uint64_t key) const {
    __builtin_prefetch(&counters_[Block(key)]);
  }

  uint64_t width() const { return width_; }
  uint64_t bytes() const { return kDepth * width_ * sizeof(uint16_t); }

 private:
  static constexpr uint32_t kStripes = 256;
  static constexpr uint32_t kBlock = kDepth * kGroup;  // counters
  // The index of the first counter of `key`'s block.
  uint64_t Block(uint64_t key) const;
  // `key`'s kDepth counter indices.
  void Cells(uint64_t key, uint64_t* cells) const;

  const uint64_t width_;
  std::unique_ptr<std::atomic<uint16_t>[]> storage_;
  std::atomic<uint16_t>* counters_;  // in storage_, 64-byte aligned
  std::unique_ptr<std::mutex[]> stripes_;
};

}  // namespace ps::train
