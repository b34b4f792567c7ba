#include "client/key_order.h"

#include <algorithm>
#include <bit>

namespace ps::worker {

void SortByKey(std::vector<KeyPosition>* pairs,
               std::vector<KeyPosition>* scratch) {
  const size_t n = pairs->size();
  constexpr size_t kSmall = 1 << 12;  // one std::sort in cache
  if (n <= kSmall) {
    std::sort(pairs->begin(), pairs->end());
    return;
  }
  // About 256 pairs a bucket, at most 2^16 buckets (a 256 KiB count
  // table, still in L2).
  const int bits = std::min(16, static_cast<int>(std::bit_width(n / 256)));
  const int shift = 64 - bits;
  std::vector<uint32_t> start((size_t{1} << bits) + 1, 0);
  for (const KeyPosition& p : *pairs) ++start[(p.first >> shift) + 1];
  for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  scratch->resize(n);
  std::vector<uint32_t> next(start.begin(), start.end() - 1);
  // Stable: pairs of one bucket keep their order (positions ascending for
  // a key, as the caller made them).
  for (const KeyPosition& p : *pairs) (*scratch)[next[p.first >> shift]++] = p;
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    std::sort(scratch->begin() + start[b], scratch->begin() + start[b + 1]);
  }
  pairs->swap(*scratch);
}

}  // namespace ps::worker
