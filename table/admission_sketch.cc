#include "table/admission_sketch.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ps::table {
namespace {

// One multiply-shift per row: independent cells from one 64-bit hash.
constexpr uint64_t kRowSalt[AdmissionSketch::kDepth] = {
    0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull,
    0xd6e8feb86659fd93ull};

}  // namespace

AdmissionSketch::AdmissionSketch(uint64_t width)
    : mask_(std::bit_ceil(std::max<uint64_t>(width, 64)) - 1),
      counters_(kDepth * (mask_ + 1), 0) {}

size_t AdmissionSketch::Cell(uint64_t hash, int r) const {
  const uint64_t h = (hash ^ (hash >> 29)) * kRowSalt[r];
  return static_cast<size_t>(r) * (mask_ + 1) + ((h >> 32) & mask_);
}

uint32_t AdmissionSketch::Estimate(uint64_t hash) const {
  uint32_t least = kMaxCount;
  for (int r = 0; r < kDepth; ++r) {
    least = std::min<uint32_t>(least, counters_[Cell(hash, r)]);
  }
  return least;
}

uint32_t AdmissionSketch::Add(uint64_t hash) {
  uint32_t least = kMaxCount;
  for (int r = 0; r < kDepth; ++r) {
    uint16_t& c = counters_[Cell(hash, r)];
    if (c == 0) ++in_use_[r];
    if (c < kMaxCount) ++c;
    least = std::min<uint32_t>(least, c);
  }
  if (++added_since_aging_ >= 8 * width()) Age();
  return least;
}

void AdmissionSketch::Forget(uint64_t hash) {
  const uint32_t count = Estimate(hash);
  // Every one of the key's counters holds at least its estimate.
  if (count == 0) return;
  for (int r = 0; r < kDepth; ++r) {
    uint16_t& c = counters_[Cell(hash, r)];
    c = static_cast<uint16_t>(c - count);  // c >= count: the least of them
    if (c == 0) --in_use_[r];
  }
}

void AdmissionSketch::Age() {
  for (int r = 0; r < kDepth; ++r) {
    in_use_[r] = 0;
    for (uint64_t i = 0; i < width(); ++i) {
      uint16_t& c = counters_[r * width() + i];
      c >>= 1;
      in_use_[r] += c != 0;
    }
  }
  added_since_aging_ = 0;
}

uint64_t AdmissionSketch::EstimatedKeys() const {
  // The fullest row is the one where the fewest keys share a counter: its
  // estimate is the best (linear counting corrects for the sharing it
  // expects).
  const uint64_t w = width();
  const uint64_t zeros = w - *std::max_element(in_use_, in_use_ + kDepth);
  if (zeros == 0) return w;  // every counter in use: at least this many
  return static_cast<uint64_t>(std::llround(
      -static_cast<double>(w) *
      std::log(static_cast<double>(zeros) / static_cast<double>(w))));
}

}  // namespace ps::table
