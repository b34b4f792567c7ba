// SortByKey: the order in which an EXACT table's push sums and packs its
// keys (ascending key, a key's gradients in the order they were given).
// A stable most-significant-digit radix sort, 8 bits a pass, insertion
// sort for the last few pairs of a run: 10M random pairs sort in about
// 0.27 s here, against 0.43 s for one counting pass into 2^15 buckets and
// std::sort within each, and several times less than one std::sort. Keys
// that agree on many bits (small ids) skip the passes that would not split
// them. SortSpreadRunByKey is the step HashOrder (client/hash_order.h)
// runs on each thread's share of hashes.
//
// Thread safety: a function of its arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ps::worker {

using KeyPosition = std::pair<uint64_t, uint32_t>;  // (key, position)

// Sorts `pairs` by key, then position (stable: the caller gives equal keys
// in position order); `scratch` is reused between calls.
void SortByKey(std::vector<KeyPosition>* pairs,
               std::vector<KeyPosition>* scratch);

// The same, handing each run of the sorted pairs to `on_run` as soon as it
// is sorted, runs in ascending key order (up to 256 of them, split by the
// first bits in which the keys differ), so that the caller can send one
// while the rest sorts. A key's pairs all lie in one run. The first
// failure of `on_run` stops the sort and is returned; `pairs` is then in no
// particular order.
using SortedRunFn = std::function<Status(std::span<const KeyPosition>)>;
Status SortByKey(std::vector<KeyPosition>* pairs,
                 std::vector<KeyPosition>* scratch, const SortedRunFn& on_run);

// One step of a sort split across threads (client/hash_order.h): sorts the
// n pairs at `from`, whose keys agree above bit `shift` and spread evenly
// below it (hashes), by key and stably, in place; `to` is scratch of n
// pairs. Keys that do not spread are sorted all the same, only slower.
void SortSpreadRunByKey(KeyPosition* from, KeyPosition* to, size_t n,
                        int shift);

}  // namespace ps::worker
