#include "table/row_index.h"

#include <algorithm>
#include <cmath>
#include <new>

namespace ps::table {
namespace {

constexpr size_t kMinSlots = 16;

// The slots an index filed by hash order needs before `n` inserts of new
// keys whose hashes lie in [low, high] (RowIndex::ReserveForRange): as
// many as the whole array would need at the range's fill after the
// inserts, at most room for `most` keys, at least for `size` + n, at
// `max_load_percent`. `held`: the slots the whole array would have taken
// at the range's fill now; the new keys add theirs at the range's share
// of the hashes below the owner's `owner_bits`.
size_t SlotsForRange(size_t size, size_t n, double held, uint64_t low,
                     uint64_t high, size_t most, int owner_bits,
                     uint32_t max_load_percent) {
  const double share = std::ldexp(
      static_cast<double>((high << owner_bits) - (low << owner_bits)) + 1, -64);
  const double projected = held + n / std::max(share, 0x1p-40);
  const size_t keys = std::max<size_t>(
      size + n, static_cast<size_t>(std::min<double>(projected, most)));
  return (keys * 100 + max_load_percent - 1) / max_load_percent;
}

}  // namespace

bool RowIndex::Rebuild(size_t slots, RowKeys keys) {
  Slots fresh;
  if (spare_.size() == slots) {
    fresh.swap(spare_);
  } else {
    fresh = EmptySlots(slots);
    if (fresh.empty()) return false;  // no memory: nothing changed
  }
  Slots old;
  old.swap(slots_);
  slots_.swap(fresh);
  if (!SpareUsable(spare_.size())) Slots().swap(spare_);
  mask_ = slots - 1;
  home_shift_ = 64 - __builtin_ctzll(slots);
  tombstones_ = 0;
  // The old slots are in hash order, so the new ones fill from one end to
  // the other; each entry's key is read (for its hash) a few entries
  // ahead of its turn, from the owner's rows, which lie in no such order.
  auto live = [](uint32_t s) { return s != kEmpty && s != kTombstone; };
  constexpr size_t kAhead = 16;
  for (size_t i = 0; i < std::min(old.size(), kAhead); ++i) {
    if (live(old[i])) __builtin_prefetch(keys.at(RowOf(old[i])));
  }
  for (size_t i = 0; i < old.size(); ++i) {
    if (i + kAhead < old.size() && live(old[i + kAhead])) {
      __builtin_prefetch(keys.at(RowOf(old[i + kAhead])));
    }
    const uint32_t s = old[i];
    if (!live(s)) continue;
    size_t j = HomeOf(Mix(keys.of(RowOf(s))));
    while (slots_[j] != kEmpty) j = (j + 1) & mask_;
    slots_[j] = s;
  }
  return true;
}

bool RowIndex::Insert(uint64_t hash, uint32_t row, RowKeys keys) {
  if (row >= kMaxRows) return false;
  // At most max_load_percent full, tombstones counted: probes stay short.
  if ((size_ + tombstones_ + 1) * 100 > slots_.size() * max_load_percent_) {
    if (!Rebuild(GrowthSlots(), keys)) return false;
  }
  size_t i = HomeOf(hash);
  while (slots_[i] != kEmpty && slots_[i] != kTombstone) i = (i + 1) & mask_;
  if (slots_[i] == kTombstone) --tombstones_;
  slots_[i] = (Fingerprint(hash) << kRowBits) | (row + 1);
  ++size_;
  return true;
}

size_t RowIndex::GrowthSlots() const {
  if (slots_.empty()) return kMinSlots;
  const bool refile =
      (size_ + 1) * 400 <= slots_.size() * max_load_percent_ * 3;
  return refile ? slots_.size() : 2 * slots_.size();
}

size_t RowIndex::SpareWanted(uint32_t lead_percent) const {
  if (slots_.empty()) return 0;
  const size_t lead = slots_.size() * lead_percent / 100;
  if ((size_ + tombstones_ + lead) * 100 <= slots_.size() * max_load_percent_) {
    return 0;  // not near a growth yet
  }
  const size_t slots = GrowthSlots();
  return spare_.size() == slots ? 0 : slots;
}

bool RowIndex::SpareUsable(size_t n) const {
  return n > slots_.size() || n == GrowthSlots();
}

void RowIndex::AdoptSpare(Slots spare) {
  if (!SpareUsable(spare.size())) return;
  spare_.swap(spare);  // the one held before (if any) is freed with `spare`
}

RowIndex::Slots RowIndex::EmptySlots(size_t n) {
  try {
    return Slots(n, kEmpty);
  } catch (const std::bad_alloc&) {
    return Slots();
  }
}

bool RowIndex::ReserveForRange(size_t n, uint64_t low, uint64_t high,
                               size_t most, RowKeys keys) {
  // At most what the array holds: a sample that finds a range fuller than
  // the whole array (its noise, a few percent) must not double the array
  // early, as at every batch of a growth that spans every range.
  const double held =
      std::min(FilledShare(low, high) * static_cast<double>(slots_.size()),
               static_cast<double>(size_ + tombstones_));
  const size_t slots = SlotsForRange(size_, n, held, low, high, most,
                                     owner_bits_, max_load_percent_);
  if (slots <= slots_.size()) return true;
  size_t grown = slots_.empty() ? kMinSlots : 2 * slots_.size();
  while (grown < slots) grown *= 2;
  return Rebuild(grown, keys);
}

double RowIndex::FilledShare(uint64_t low, uint64_t high) const {
  if (slots_.empty()) return 0;
  const size_t first = HomeOf(low), last = HomeOf(high);
  if (last < first) return 0;  // not one owner's range: nothing to go by
  const size_t span = last - first + 1;
  const size_t step = std::max<size_t>(1, span / kFillSamples);
  size_t seen = 0, filled = 0;
  for (size_t i = 0; i < span; i += step) {
    ++seen;
    filled += slots_[first + i] != kEmpty;
  }
  return static_cast<double>(filled) / static_cast<double>(seen);
}

void RowIndex::Erase(uint64_t key, uint64_t hash, RowKeys keys) {
  if (slots_.empty()) return;
  const uint32_t fp = Fingerprint(hash);
  size_t at = HomeOf(hash);
  for (;; at = (at + 1) & mask_) {
    const uint32_t s = slots_[at];
    if (s == kEmpty) return;  // absent
    if ((s >> kRowBits) == fp && s != kTombstone && keys.of(RowOf(s)) == key) {
      break;
    }
  }
  --size_;
  if (slots_[(at + 1) & mask_] != kEmpty) {
    slots_[at] = kTombstone;
    ++tombstones_;
    return;
  }
  // The end of a run: no probe passes here, so the slot is empty again,
  // and so are the tombstones just before it.
  slots_[at] = kEmpty;
  for (at = (at - 1) & mask_; slots_[at] == kTombstone; at = (at - 1) & mask_) {
    slots_[at] = kEmpty;
    --tombstones_;
  }
}

}  // namespace ps::table
