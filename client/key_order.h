// SortByKey: the order in which an EXACT table's push sums and packs its
// keys (ascending key, a key's gradients in the order they were given).
// Millions of pairs sort several times faster than with one std::sort: a
// stable counting pass scatters them by the top bits of the key into
// buckets of a few hundred pairs, which then sort in cache. Keys crowded
// into few buckets (small ids) fall back to std::sort within them: never
// slower than sorting the whole.
//
// Thread safety: a function of its arguments.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ps::worker {

using KeyPosition = std::pair<uint64_t, uint32_t>;  // (key, position)

// Sorts `pairs` by key, then position; `scratch` is reused between calls.
void SortByKey(std::vector<KeyPosition>* pairs,
               std::vector<KeyPosition>* scratch);

}  // namespace ps::worker
