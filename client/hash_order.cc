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
  const size_t parts = std::clamp<size_t>(n / kMinKeysPerPart, 1,
                                          static_cast<size_t>(pool.size()));
  const auto key_begin = [&](size_t p) { return n * p / parts; };
  constexpr int kRunShift = 64 - kFirstBits;
  const auto pair_of = [&](size_t i) -> KeyPosition {
    const uint64_t hash = protocol::KeyHash(keys[i]);
    return {hash, values.empty() ? static_cast<uint32_t>(i)
                                 : std::bit_cast<uint32_t>(values[i])};
  };
  // Pass 1, per part: how many of its pairs fall in each run. The hashes
  // are computed again in pass 2 rather than kept: a second array of n
  // pairs is memory a first call must fault in (on a VM, ~2.5 ms a MiB),
  // while a hash is a few multiplies.
  std::vector<std::array<size_t, kRuns>> next(parts);
  pool.ForEachPart(parts, [&](size_t p) {
    std::array<size_t, kRuns>& count = next[p];
    count.fill(0);
    for (size_t i = key_begin(p); i < key_begin(p + 1); ++i) {
      ++count[protocol::KeyHash(keys[i]) >> kRunShift];
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
      const KeyPosition pair = pair_of(i);
      pairs_[to[pair.first >> kRunShift]++] = pair;
    }
  });
  // Pass 3, per part: a contiguous share of the runs, with about as many
  // pairs as the other parts', sorted within, each through the part's
  // scratch of its longest run (a run is ~n/256 pairs: it stays in cache).
  std::vector<int> part_runs(parts + 1, kRuns);
  part_runs[0] = 0;
  for (size_t p = 1, r = 0; p < parts; ++p) {
    while (r < kRuns && run_begin[r] < key_begin(p)) ++r;
    part_runs[p] = static_cast<int>(r);
  }
  if (run_scratch_.size() < parts) run_scratch_.resize(parts);
  pool.ForEachPart(parts, [&](size_t p) {
    size_t longest = 0;
    for (int r = part_runs[p]; r < part_runs[p + 1]; ++r) {
      longest = std::max(longest, run_begin[r + 1] - run_begin[r]);
    }
    std::vector<KeyPosition>& scratch = run_scratch_[p];
    if (scratch.size() < longest) scratch.resize(longest);
    for (int r = part_runs[p]; r < part_runs[p + 1]; ++r) {
      const size_t b = run_begin[r];
      SortSpreadRunByKey(pairs_.data() + b, scratch.data(),
                         run_begin[r + 1] - b, kRunShift);
    }
    const size_t first = run_begin[part_runs[p]];
    const size_t last = run_begin[part_runs[p + 1]];
    if (on_sorted && first < last) on_sorted(first, last);
  });
}

}  // namespace ps::worker
