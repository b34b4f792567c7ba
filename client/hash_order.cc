#include "client/hash_order.h"

#include <algorithm>
#include <array>
#include <bit>

#include "protocol/key_hash.h"

namespace ps::worker {
namespace {

// The first pass splits by this many top bits, into 1 << kFirstBits runs.
constexpr int kFirstBits = 8;
constexpr int kRuns = 1 << kFirstBits;
// Each thread's part has at least this many keys (fewer parts otherwise):
// waking the pool for less costs more than it saves.
constexpr size_t kMinKeysPerPart = size_t{1} << 16;

}  // namespace

void HashOrder::Sort(std::span<const uint64_t> keys, SharedPool& pool,
                     const SortedFn& on_sorted, std::span<const float> values) {
  const size_t n = keys.size();
  size_ = n;
  pairs_.Resize(n);
  scratch_.Resize(n);
  const size_t parts = std::clamp<size_t>(n / kMinKeysPerPart, 1,
                                          static_cast<size_t>(pool.size()));
  const auto key_begin = [&](size_t p) { return n * p / parts; };
  // Pass 1, per part: the pairs in the call's order, and how many fall in
  // each run.
  std::vector<std::array<size_t, kRuns>> next(parts);
  constexpr int kRunShift = 64 - kFirstBits;
  pool.ForEachPart(parts, [&](size_t p) {
    std::array<size_t, kRuns>& count = next[p];
    count.fill(0);
    const bool carry = !values.empty();
    for (size_t i = key_begin(p); i < key_begin(p + 1); ++i) {
      const uint64_t hash = protocol::KeyHash(keys[i]);
      scratch_[i] = {hash, carry ? std::bit_cast<uint32_t>(values[i])
                                 : static_cast<uint32_t>(i)};
      ++count[hash >> kRunShift];
    }
  });
  // Where each part's pairs of each run go: a run holds part 0's pairs,
  // then part 1's, ..., so the split is stable.
  std::array<size_t, kRuns + 1> run_begin{};
  size_t at = 0;
  for (int r = 0; r < kRuns; ++r) {
    run_begin[r] = at;
    for (size_t p = 0; p < parts; ++p) {
      const size_t count = next[p][r];
      next[p][r] = at;
      at += count;
    }
  }
  run_begin[kRuns] = n;
  // Pass 2, per part: its pairs into their runs.
  pool.ForEachPart(parts, [&](size_t p) {
    std::array<size_t, kRuns>& to = next[p];
    for (size_t i = key_begin(p); i < key_begin(p + 1); ++i) {
      pairs_[to[scratch_[i].first >> kRunShift]++] = scratch_[i];
    }
  });
  // Pass 3, per part: a contiguous share of the runs, with about as many
  // pairs as the other parts', sorted within.
  std::vector<int> part_runs(parts + 1, kRuns);
  part_runs[0] = 0;
  for (size_t p = 1, r = 0; p < parts; ++p) {
    while (r < kRuns && run_begin[r] < key_begin(p)) ++r;
    part_runs[p] = static_cast<int>(r);
  }
  pool.ForEachPart(parts, [&](size_t p) {
    const size_t first = run_begin[part_runs[p]];
    const size_t last = run_begin[part_runs[p + 1]];
    for (int r = part_runs[p]; r < part_runs[p + 1]; ++r) {
      const size_t b = run_begin[r];
      SortSpreadRunByKey(pairs_.data() + b, scratch_.data() + b,
                         run_begin[r + 1] - b, kRunShift);
    }
    if (on_sorted && first < last) on_sorted(first, last);
  });
}

}  // namespace ps::worker
