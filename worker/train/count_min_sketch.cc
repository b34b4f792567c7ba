#include "worker/train/count_min_sketch.h"

#include <algorithm>
#include <bit>

#include "protocol/shard_map.h"

namespace ps::train {
namespace {

// Independent hash positions per row: the key (already a hash) mixed with
// a different odd constant per row.
constexpr uint64_t kRowSeeds[CountMinSketch::kDepth] = {
    0x243f6a8885a308d3ULL, 0x13198a2e03707345ULL, 0xa4093822299f31d1ULL,
    0x082efa98ec4e6c89ULL};

}  // namespace

namespace {

uint64_t UsableWidth(uint64_t width) {
  return std::clamp<uint64_t>(std::bit_floor(std::max<uint64_t>(width, 1)),
                              CountMinSketch::kMinWidth,
                              CountMinSketch::kMaxWidth);
}

}  // namespace

uint64_t CountMinSketch::WidthForBytes(uint64_t bytes) {
  return UsableWidth(bytes / (kDepth * sizeof(uint16_t)));
}

CountMinSketch::CountMinSketch(uint64_t width)
    : width_(UsableWidth(width)),
      counters_(new std::atomic<uint16_t>[kDepth * width_]),
      stripes_(new std::mutex[kStripes]) {
  for (uint64_t i = 0; i < kDepth * width_; ++i) {
    counters_[i].store(0, std::memory_order_relaxed);
  }
}

uint64_t CountMinSketch::Cell(uint32_t row, uint64_t key) const {
  return row * width_ + (protocol::Mix64(key ^ kRowSeeds[row]) & (width_ - 1));
}

uint32_t CountMinSketch::Estimate(uint64_t key) const {
  uint32_t least = kMaxCount;
  for (uint32_t r = 0; r < kDepth; ++r) {
    least = std::min<uint32_t>(
        least, counters_[Cell(r, key)].load(std::memory_order_relaxed));
  }
  return least;
}

uint32_t CountMinSketch::Add(uint64_t key) {
  uint64_t cells[kDepth];
  for (uint32_t r = 0; r < kDepth; ++r) cells[r] = Cell(r, key);
  // Serialises the Adds of this key: between two of them only other keys'
  // Adds touch its counters, and those only raise them, so the estimate
  // read here is at least the count of the key's earlier Adds.
  std::lock_guard<std::mutex> lock(stripes_[protocol::Mix64(key) % kStripes]);
  uint32_t least = kMaxCount;
  for (uint64_t c : cells) {
    least =
        std::min<uint32_t>(least, counters_[c].load(std::memory_order_relaxed));
  }
  if (least == kMaxCount) return least;
  const uint16_t target = static_cast<uint16_t>(least + 1);
  for (uint64_t c : cells) {
    uint16_t seen = counters_[c].load(std::memory_order_relaxed);
    while (seen < target && !counters_[c].compare_exchange_weak(
                                seen, target, std::memory_order_relaxed)) {
    }
  }
  return target;
}

}  // namespace ps::train
