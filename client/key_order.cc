#include "client/key_order.h"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace ps::worker {
namespace {

constexpr size_t kInsertionMax = 16;
// SortSpreadRunByKey sorts runs of up to this many pairs by counting passes
// and insertion (about 8 pairs per value of the 16 bits they count on).
constexpr size_t kSpreadRunMax = size_t{8} << 16;

// Insertion sort by key, stable: the short runs the radix passes leave,
// and the nearly sorted ones of SortSpreadRunByKey. Gives up, returning
// false, once it has moved pairs more than `budget` places in all: the
// pairs are then partly sorted, equal keys still in the order they came.
bool InsertionSortByKey(KeyPosition* first, KeyPosition* last,
                        size_t budget = SIZE_MAX) {
  size_t moves = 0;
  for (KeyPosition* i = first + 1; i < last; ++i) {
    const KeyPosition p = *i;
    KeyPosition* j = i;
    for (; j > first && (j - 1)->first > p.first; --j) *j = *(j - 1);
    *j = p;
    moves += static_cast<size_t>(i - j);
    if (moves > budget) return false;
  }
  return true;
}

// Sorts the n pairs at `from`, whose keys agree above bit `shift`, by key
// and stably, leaving them at `out` (`from` or the same range of the
// other buffer, `to`, which it may overwrite). A most-significant-digit
// radix sort, 8 bits a pass: each pass scatters into 256 runs, so its
// writes stay in a few hundred cache lines and pages (one pass into tens of
// thousands of buckets missed the TLB at nearly every pair), and every
// pass after the first runs in cache. `on_run`, when given, gets each run
// of the first pass that splits the range once it is sorted.
Status SortRange(KeyPosition* from, KeyPosition* to, size_t n, int shift,
                 KeyPosition* out, const SortedRunFn* on_run) {
  while (n > kInsertionMax && shift > 0) {
    // 8 bits a pass, fewer for a small range: runs of a few pairs, without
    // 256 counters to clear and scan for a hundred pairs.
    const int bits = std::min(
        {8, shift, std::max(1, static_cast<int>(std::bit_width(n / 4)))});
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    const int runs = 1 << bits;
    shift -= bits;
    uint32_t start[257] = {};
    for (size_t i = 0; i < n; ++i)
      ++start[((from[i].first >> shift) & mask) + 1];
    // Keys that agree on these bits too (small ids): nothing to scatter.
    if (std::find(start + 1, start + runs + 1, n) != start + runs + 1) continue;
    for (int r = 1; r <= runs; ++r) start[r] += start[r - 1];
    uint32_t next[256];
    std::copy_n(start, runs, next);
    for (size_t i = 0; i < n; ++i) {
      to[next[(from[i].first >> shift) & mask]++] = from[i];
    }
    for (int r = 0; r < runs; ++r) {
      const uint32_t size = start[r + 1] - start[r];
      if (size == 0) continue;
      (void)SortRange(to + start[r], from + start[r], size, shift,
                      out + start[r], nullptr);
      if (on_run != nullptr) {
        PS_RETURN_IF_ERROR((*on_run)({out + start[r], size}));
      }
    }
    return Status::OK();
  }
  // Few pairs, or pairs of one key (already in position order).
  if (shift > 0 && n > 1) InsertionSortByKey(from, from + n);
  if (out != from && n != 0) std::copy_n(from, n, out);
  return on_run != nullptr && n != 0 ? (*on_run)({out, n}) : Status::OK();
}

}  // namespace

void SortByKey(std::vector<KeyPosition>* pairs,
               std::vector<KeyPosition>* scratch) {
  scratch->resize(pairs->size());
  // Stable throughout: equal keys keep their order, which is the order of
  // their positions as the caller made them.
  (void)SortRange(pairs->data(), scratch->data(), pairs->size(), 64,
                  pairs->data(), nullptr);
}

void SortSpreadRunByKey(KeyPosition* from, KeyPosition* to, size_t n,
                        int shift) {
  if (shift < 16 || n > kSpreadRunMax || n <= kInsertionMax) {
    (void)SortRange(from, to, n, shift, from, nullptr);
    return;
  }
  // Two counting passes on the 16 bits below `shift`, the lower byte first,
  // leave few keys per value of those bits (n / 65536 on average for
  // hashes), so the insertion sort after them moves few pairs. The MSD
  // sort's last passes split runs of a few hundred pairs into dozens of
  // tiny ones, with a table of 257 counters each: 2-3x the time of this.
  // Keys crowded into a few values would make the insertion sort
  // quadratic: past a budget of moves, a stable merge sort finishes (every
  // step so far was stable, so equal keys are still in position order).
  uint32_t count[2][257] = {};
  for (size_t i = 0; i < n; ++i) {
    ++count[0][((from[i].first >> (shift - 16)) & 0xff) + 1];
    ++count[1][((from[i].first >> (shift - 8)) & 0xff) + 1];
  }
  for (int pass = 0; pass < 2; ++pass) {
    uint32_t* next = count[pass];
    for (int r = 1; r <= 256; ++r) next[r] += next[r - 1];
    const int at = shift - 16 + 8 * pass;
    const KeyPosition* src = pass == 0 ? from : to;
    KeyPosition* dst = pass == 0 ? to : from;
    for (size_t i = 0; i < n; ++i) {
      dst[next[(src[i].first >> at) & 0xff]++] = src[i];
    }
  }
  if (!InsertionSortByKey(from, from + n, /*budget=*/8 * n)) {
    std::stable_sort(from, from + n,
                     [](const KeyPosition& a, const KeyPosition& b) {
                       return a.first < b.first;
                     });
  }
}

Status SortByKey(std::vector<KeyPosition>* pairs,
                 std::vector<KeyPosition>* scratch, const SortedRunFn& on_run) {
  scratch->resize(pairs->size());
  return SortRange(pairs->data(), scratch->data(), pairs->size(), 64,
                   pairs->data(), &on_run);
}

}  // namespace ps::worker
