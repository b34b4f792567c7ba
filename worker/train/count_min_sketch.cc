#include "worker/train/count_min_sketch.h"

#include <algorithm>
#include <bit>

#include "protocol/shard_map.h"

namespace ps::train {
namespace {

// The block and the positions within it come from two independent mixes
// of the key (already a hash itself).
constexpr uint64_t kBlockSeed = 0x243f6a8885a308d3ULL;
constexpr uint64_t kPositionSeed = 0x13198a2e03707345ULL;

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
      storage_(new std::atomic<uint16_t>[kDepth * width_ + kBlock]),
      stripes_(new std::mutex[kStripes]) {
  // 64-byte alignment: a block is one cache line.
  const uintptr_t at = reinterpret_cast<uintptr_t>(storage_.get());
  counters_ = storage_.get() + (64 - at % 64) % 64 / sizeof(uint16_t);
  for (uint64_t i = 0; i < kDepth * width_ + kBlock; ++i) {
    storage_[i].store(0, std::memory_order_relaxed);
  }
}

uint64_t CountMinSketch::Block(uint64_t key) const {
  const uint64_t blocks = kDepth * width_ / kBlock;  // a power of two
  return (protocol::Mix64(key ^ kBlockSeed) & (blocks - 1)) * kBlock;
}

void CountMinSketch::Cells(uint64_t key, uint64_t* cells) const {
  const uint64_t block = Block(key);
  const uint64_t positions = protocol::Mix64(key ^ kPositionSeed);
  for (uint32_t r = 0; r < kDepth; ++r) {
    cells[r] = block + r * kGroup + ((positions >> (3 * r)) & (kGroup - 1));
  }
}

uint32_t CountMinSketch::Estimate(uint64_t key) const {
  uint64_t cells[kDepth];
  Cells(key, cells);
  uint32_t least = kMaxCount;
  for (uint64_t c : cells) {
    least =
        std::min<uint32_t>(least, counters_[c].load(std::memory_order_relaxed));
  }
  return least;
}

uint32_t CountMinSketch::Add(uint64_t key) {
  uint64_t cells[kDepth];
  Cells(key, cells);
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
