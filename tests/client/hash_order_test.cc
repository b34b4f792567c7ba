// HashOrder (client/hash_order.h) on a pool of several threads and on the
// calling thread: the pairs are (KeyHash(key), position), ordered as a
// stable sort by the hash orders them, every key once;
// one-float values ride in place of the positions; the ranges handed to
// on_sorted are disjoint, cover every pair and come once each; progress
// reports only pairs sorted and handed over. Runs under
// TSan too (the passes share the pair arrays between threads).
#include "client/hash_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <mutex>
#include <random>
#include <vector>

#include "protocol/key_hash.h"

namespace ps::worker {
namespace {

std::vector<uint64_t> Keys(size_t n, uint64_t mask, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (uint64_t& k : keys) k = rng() & mask;
  return keys;
}

// What Sort must give: a stable sort of (KeyHash(key), i) by the hash.
std::vector<KeyPosition> Want(const std::vector<uint64_t>& keys) {
  std::vector<KeyPosition> want(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    want[i] = {protocol::KeyHash(keys[i]), static_cast<uint32_t>(i)};
  }
  std::stable_sort(want.begin(), want.end(),
                   [](const KeyPosition& a, const KeyPosition& b) {
                     return a.first < b.first;
                   });
  return want;
}

class HashOrderTest : public ::testing::TestWithParam<int> {};

TEST_P(HashOrderTest, SortsByTheWholeHashStably) {
  SharedPool pool(GetParam());
  HashOrder order;
  // Spread keys, few keys many times (their pairs in position order), and
  // one key (one run of every pair: a part's scratch must hold it all).
  for (uint64_t mask : {~0ull, 0x3ffull, 0ull, ~0ull}) {
    const std::vector<uint64_t> keys = Keys(300000, mask, 1);
    order.Sort(keys, pool);
    const std::vector<KeyPosition> got(order.pairs().begin(),
                                       order.pairs().end());
    EXPECT_EQ(got, Want(keys)) << "mask " << mask;
  }
}

TEST_P(HashOrderTest, CarriesOneFloatValuesInPlaceOfPositions) {
  SharedPool pool(GetParam());
  HashOrder order;
  const std::vector<uint64_t> keys = Keys(200000, 0xfffffull, 3);
  std::vector<float> values(keys.size());
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(i) * 0.5f - 3.0f;
  }
  order.Sort(keys, pool, {}, values);
  const std::vector<KeyPosition> want = Want(keys);
  ASSERT_EQ(order.pairs().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(order.pairs()[i].first, want[i].first) << i;
    ASSERT_EQ(std::bit_cast<float>(order.pairs()[i].second),
              values[want[i].second])
        << i;
  }
}

TEST_P(HashOrderTest, SortedRangesCoverEveryPairOnce) {
  SharedPool pool(GetParam());
  HashOrder order;
  for (size_t n : {size_t{0}, size_t{1}, size_t{5000}, size_t{400000}}) {
    const std::vector<uint64_t> keys = Keys(n, ~0ull, 4 + n);
    std::vector<int> seen(n, 0);
    std::mutex mu;
    std::vector<std::pair<size_t, size_t>> ranges;
    order.Sort(keys, pool, [&](size_t begin, size_t end) {
      ASSERT_LT(begin, end);
      ASSERT_LE(end, n);
      // Each range is sorted when handed over.
      for (size_t i = begin + 1; i < end; ++i) {
        ASSERT_LE(order.pairs()[i - 1].first, order.pairs()[i].first);
      }
      std::lock_guard<std::mutex> lock(mu);
      for (size_t i = begin; i < end; ++i) ++seen[i];
      ranges.emplace_back(begin, end);
    });
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1),
              static_cast<std::ptrdiff_t>(n))
        << n << " keys in " << ranges.size() << " ranges";
    EXPECT_EQ(order.pairs().size(), n);
  }
}

// Given a progress function, the calling thread reports a prefix that only
// grows, and every pair in it is sorted and was handed to on_sorted before
// the report: what a pull relies on to ask for those keys meanwhile.
TEST_P(HashOrderTest, ProgressReportsOnlyPairsSortedAndHandedOver) {
  SharedPool pool(GetParam());
  HashOrder order;
  for (uint64_t mask : {~0ull, 0x3ffull}) {
    const std::vector<uint64_t> keys = Keys(400000, mask, 6);
    const size_t n = keys.size();
    std::vector<std::atomic<int>> handed(n);
    std::vector<size_t> reports;
    size_t unhanded = 0, unsorted = 0;
    order.Sort(
        keys, pool,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            handed[i].fetch_add(1, std::memory_order_relaxed);
          }
        },
        {},
        [&](size_t ready) {
          const size_t from = reports.empty() ? 0 : reports.back();
          ASSERT_GE(ready, from);
          ASSERT_LE(ready, n);
          for (size_t i = from; i < ready; ++i) {
            unhanded += handed[i].load(std::memory_order_relaxed) != 1;
            unsorted +=
                i > 0 && order.pairs()[i - 1].first > order.pairs()[i].first;
          }
          reports.push_back(ready);
        });
    EXPECT_EQ(unhanded, 0u) << "mask " << mask;
    EXPECT_EQ(unsorted, 0u) << "mask " << mask;
    // One report per run the calling thread sorted: on a pool of one, every
    // run (of 256), the last with every pair; on more, the other threads
    // may have sorted them all.
    if (GetParam() == 1) {
      ASSERT_EQ(reports.size(), 256u) << "mask " << mask;
      EXPECT_EQ(reports.back(), n) << "mask " << mask;
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(handed[i].load(), 1) << "pair " << i << ", mask " << mask;
    }
    const std::vector<KeyPosition> got(order.pairs().begin(),
                                       order.pairs().end());
    EXPECT_EQ(got, Want(keys)) << "mask " << mask;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, HashOrderTest, ::testing::Values(1, 3),
                         [](const auto& info) {
                           return std::to_string(info.param) + "Threads";
                         });

}  // namespace
}  // namespace ps::worker
