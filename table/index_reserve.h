// SlotsForRange: how large an index that files keys by hash order
// (KeyIndex, RowIndex: the hash's high bits below its owner's pick the
// slot) must be before `n` inserts of new keys whose hashes all lie in
// [low, high], the sorted runs of a worker's push. Without growing first,
// the first runs of a large push into a small index would crowd the few
// slots of their range into one long stretch, each insert probing to its
// end; grown for the keys to come, the range holds them as the whole array
// will. The range's share of all slots (its bits below the owner's) gives
// the keys the array would hold at the range's density: at most `most`,
// at least `size` (keys in it now) + n, at `max_load_percent`.
//
// A pure function: thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ps::table {

inline size_t SlotsForRange(size_t size, size_t n, uint64_t low, uint64_t high,
                            size_t most, int owner_bits,
                            uint32_t max_load_percent) {
  const double share = std::ldexp(
      static_cast<double>((high << owner_bits) - (low << owner_bits)) + 1, -64);
  const double projected = n / std::max(share, 0x1p-40);
  const size_t keys = std::max<size_t>(
      size + n, static_cast<size_t>(std::min<double>(projected, most)));
  return (keys * 100 + max_load_percent - 1) / max_load_percent;
}

}  // namespace ps::table
