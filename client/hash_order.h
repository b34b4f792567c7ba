// HashOrder: a call's keys in the order an EXACT table's server files them
// (by protocol::KeyHash: the order of its key index, and of the rows it
// gave keys that arrived so). A server that reads keys in this order reads
// its index, and mostly its rows, as streams instead of at random.
//
// The pairs (KeyHash(key), the key's position in the call) are sorted on
// the client's shared pool: a parallel count and scatter split them by the
// hash's top 8 bits, then each thread sorts its runs (SortSpreadRunByKey)
// through scratch of one run. So a call of n keys holds n pairs (16n
// bytes), not twice that.
//
// Not thread-safe: one Sort at a time (the pairs are the object's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "client/huge_array.h"
#include "client/key_order.h"
#include "client/shared_pool.h"

namespace ps::worker {

class HashOrder {
 public:
  // Called with ranges [begin, end) of pairs() once they are in order:
  // disjoint, together all of them; from the pool's threads at once, or
  // from this one, one after another, when the pool is busy.
  using SortedFn = std::function<void(size_t, size_t)>;
  // Called with how many leading pairs are sorted (and handed to on_sorted)
  // so far, from one thread, between the runs it sorts: the caller may use
  // pairs()[0, ready) while the rest sorts (a pull asks for their rows).
  using ProgressFn = std::function<void(size_t ready)>;

  // Sorts (KeyHash(keys[i]), i) by the hash, stably: a key's pairs stay in
  // position order. On the pool's threads when it is free and the keys are
  // many; else on this one. `keys` holds at most 2^32 keys.
  //
  // Given `values` (one float per key), a pair's second is the bits of
  // values[i] instead of i: a push of one-float rows carries its gradients
  // through the sort rather than read each back at random after it.
  //
  // Given `progress`, the last pass's threads take the runs one at a time
  // in ascending order (else each sorts a contiguous share, with fewer
  // hand-offs), and the calling thread reports after each run it sorts.
  void Sort(std::span<const uint64_t> keys, SharedPool& pool,
            const SortedFn& on_sorted = {}, std::span<const float> values = {},
            const ProgressFn& progress = {});

  // The sorted pairs of the last Sort.
  std::span<const KeyPosition> pairs() const { return {pairs_.data(), size_}; }

 private:
  // On huge pages, left untouched until written: as vectors of 4 KiB
  // pages, a first call's pairs were zeroed twice (by the kernel and by
  // the resize), which cost a first push of fresh keys more than its sort.
  HugeArray<KeyPosition> pairs_;
  size_t size_ = 0;
  // Per part of the pool (pass 3): room for its longest run.
  std::vector<std::vector<KeyPosition>> run_scratch_;
};

}  // namespace ps::worker
