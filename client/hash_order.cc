#include "client/hash_order.h"

#include <algorithm>
#include <array>
#include <atomic>
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

// Pass 3 of a Sort given `progress`: sort_run(r, part) sorts run r with
// the part's scratch.
template <class SortRun>
void SortRunsInOrder(const std::array<size_t, kRuns + 1>& run_begin,
                     SharedPool& pool, size_t parts, const SortRun& sort_run,
                     const HashOrder::SortedFn& on_sorted,
                     const HashOrder::ProgressFn& progress) {
  // Each thread claims the lowest run not taken yet; the calling thread
  // (part 0) then reports the runs sorted from the first on, whoever
  // sorted them (the release and acquire on `sorted` order their pairs).
  std::atomic<int> next{0};
  std::array<std::atomic<bool>, kRuns> sorted{};
  int ready = 0;  // part 0's: runs [0, ready) are sorted
  pool.ForEachPart(parts, [&](size_t p) {
    for (int r; (r = next.fetch_add(1, std::memory_order_relaxed)) < kRuns;) {
      sort_run(r, p);
      if (on_sorted && run_begin[r] < run_begin[r + 1]) {
        on_sorted(run_begin[r], run_begin[r + 1]);
      }
      sorted[r].store(true, std::memory_order_release);
      if (p != 0) continue;
      while (ready < kRuns && sorted[ready].load(std::memory_order_acquire)) {
        ++ready;
      }
      progress(run_begin[ready]);
    }
  });
}

}  // namespace

void HashOrder::Sort(std::span<const uint64_t> keys, SharedPool& pool,
                     const SortedFn& on_sorted, std::span<const float> values,
                     const ProgressFn& progress) {
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
  if (run_scratch_.size() < parts) run_scratch_.resize(parts);
  const auto sort_run = [&](int r, size_t part) {
    std::vector<KeyPosition>& scratch = run_scratch_[part];
    const size_t b = run_begin[r], size = run_begin[r + 1] - b;
    if (scratch.size() < size) scratch.resize(size);
    SortSpreadRunByKey(pairs_.data() + b, scratch.data(), size, kRunShift);
  };
  if (progress) {
    SortRunsInOrder(run_begin, pool, parts, sort_run, on_sorted, progress);
    return;
  }
  // Pass 3, per part: a contiguous share of the runs, with about as many
  // pairs as the other parts', sorted within, each through the part's
  // scratch of its longest run (a run is ~n/256 pairs: it stays in cache).
  std::vector<int> part_runs(parts + 1, kRuns);
  part_runs[0] = 0;
  for (size_t p = 1, r = 0; p < parts; ++p) {
    while (r < kRuns && run_begin[r] < key_begin(p)) ++r;
    part_runs[p] = static_cast<int>(r);
  }
  pool.ForEachPart(parts, [&](size_t p) {
    for (int r = part_runs[p]; r < part_runs[p + 1]; ++r) {
      sort_run(r, p);
    }
    const size_t first = run_begin[part_runs[p]];
    const size_t last = run_begin[part_runs[p + 1]];
    if (on_sorted && first < last) on_sorted(first, last);
  });
}

}  // namespace ps::worker
