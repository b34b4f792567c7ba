#include "table/key_index.h"

#include <new>

namespace ps::table {
namespace {

constexpr size_t kMinSlots = 16;

}  // namespace

bool KeyIndex::Grow(size_t at_least) {
  size_t slots = slots_.empty() ? kMinSlots : 2 * slots_.size();
  while (slots < at_least) slots *= 2;
  Slots old;
  try {
    old.swap(slots_);
    slots_.assign(slots, Slot{});
  } catch (const std::bad_alloc&) {
    slots_.swap(old);
    return false;
  }
  mask_ = slots - 1;
  home_shift_ = 64 - __builtin_ctzll(slots);
  for (const Slot& s : old) {
    if (s.row != kNone) slots_[Probe(s.key, Mix(s.key))] = s;
  }
  return true;
}

bool KeyIndex::Insert(uint64_t key, uint32_t row) {
  // At most max_load_percent full: probes stay short.
  if ((size_ + 1) * 100 > slots_.size() * max_load_percent_ && !Grow()) {
    return false;
  }
  Slot& s = slots_[Probe(key, Mix(key))];
  if (s.row == kNone) ++size_;
  s.key = key;
  s.row = row;
  return true;
}

void KeyIndex::Erase(uint64_t key) {
  if (slots_.empty()) return;
  size_t hole = Probe(key, Mix(key));
  if (slots_[hole].row == kNone) return;
  --size_;
  // Shift back every entry of the run after the hole whose home does not
  // lie cyclically in (hole, j]: its probe passed the hole.
  for (size_t j = (hole + 1) & mask_; slots_[j].row != kNone;
       j = (j + 1) & mask_) {
    const size_t home = Home(slots_[j].key);
    const bool stays =
        hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole].row = kNone;
}

}  // namespace ps::table
