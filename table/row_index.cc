#include "table/row_index.h"

#include <algorithm>
#include <cmath>
#include <new>

namespace ps::table {
namespace {

constexpr size_t kMinSlots = 16;

}  // namespace

bool RowIndex::Grow(size_t at_least, RowKeys keys) {
  size_t slots = slots_.empty() ? kMinSlots : 2 * slots_.size();
  while (slots < at_least) slots *= 2;
  Slots old;
  try {
    old.swap(slots_);
    slots_.assign(slots, kEmpty);
  } catch (const std::bad_alloc&) {
    slots_.swap(old);
    return false;
  }
  mask_ = slots - 1;
  home_shift_ = 64 - __builtin_ctzll(slots);
  // The old slots are in hash order, so the new ones fill from one end to
  // the other; each entry's key is read (for its hash) a few entries
  // ahead of its turn, from the owner's rows, which lie in no such order.
  constexpr size_t kAhead = 16;
  for (size_t i = 0; i < std::min(old.size(), kAhead); ++i) {
    if (old[i] != kEmpty) __builtin_prefetch(keys.at(RowOf(old[i])));
  }
  for (size_t i = 0; i < old.size(); ++i) {
    if (i + kAhead < old.size() && old[i + kAhead] != kEmpty) {
      __builtin_prefetch(keys.at(RowOf(old[i + kAhead])));
    }
    const uint32_t s = old[i];
    if (s == kEmpty) continue;
    size_t j = HomeOf(Mix(keys.of(RowOf(s))));
    while (slots_[j] != kEmpty) j = (j + 1) & mask_;
    slots_[j] = s;
  }
  return true;
}

bool RowIndex::Insert(uint64_t hash, uint32_t row, RowKeys keys) {
  if (row >= kMaxRows) return false;
  // At most max_load_percent full: probes stay short.
  if ((size_ + 1) * 100 > slots_.size() * max_load_percent_ && !Grow(0, keys)) {
    return false;
  }
  size_t i = HomeOf(hash);
  while (slots_[i] != kEmpty) i = (i + 1) & mask_;
  slots_[i] = (Fingerprint(hash) << kRowBits) | (row + 1);
  ++size_;
  return true;
}

bool RowIndex::ReserveForRange(size_t n, uint64_t low, uint64_t high,
                               size_t most, RowKeys keys) {
  // The share of all slots the range spans (its bits below the owner's),
  // and the keys the whole array would hold at the range's density.
  const double share = std::ldexp(
      static_cast<double>((high << owner_bits_) - (low << owner_bits_)) + 1,
      -64);
  const double projected = n / std::max(share, 0x1p-40);
  const size_t want = std::max<size_t>(
      size_ + n, static_cast<size_t>(std::min<double>(projected, most)));
  const size_t slots = (want * 100 + max_load_percent_ - 1) / max_load_percent_;
  if (slots <= slots_.size()) return true;
  return Grow(slots, keys);
}

void RowIndex::Erase(uint64_t key, uint64_t hash, RowKeys keys) {
  if (slots_.empty()) return;
  const uint32_t fp = Fingerprint(hash);
  size_t hole = HomeOf(hash);
  for (;; hole = (hole + 1) & mask_) {
    const uint32_t s = slots_[hole];
    if (s == kEmpty) return;  // absent
    if ((s >> kRowBits) == fp && keys.of(RowOf(s)) == key) break;
  }
  --size_;
  // Shift back every entry of the run after the hole whose home does not
  // lie cyclically in (hole, j]: its probe passed the hole.
  for (size_t j = (hole + 1) & mask_; slots_[j] != kEmpty;
       j = (j + 1) & mask_) {
    const size_t home = HomeOf(Mix(keys.of(RowOf(slots_[j]))));
    const bool stays =
        hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = kEmpty;
}

}  // namespace ps::table
