// SortByKey (client/key_order.h) orders (key, position) pairs exactly as
// std::sort does: for keys spread over the whole range, for small ids that
// agree on their high bits, for keys that differ only in middle bits, for
// one key many times, and for a few pairs. SortSpreadRunByKey sorts a run
// as std::stable_sort by key does: spread keys, duplicates, and keys
// crowded into a few values of the bits its counting passes use.
#include "client/key_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace ps::worker {
namespace {

std::vector<KeyPosition> Pairs(size_t n, uint64_t key_mask, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<KeyPosition> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = {rng() & key_mask, static_cast<uint32_t>(i)};
  }
  return v;
}

void ExpectSortedLikeStdSort(std::vector<KeyPosition> v) {
  std::vector<KeyPosition> want = v, scratch;
  std::sort(want.begin(), want.end());
  SortByKey(&v, &scratch);
  EXPECT_EQ(v, want);
}

TEST(KeyOrderTest, SpreadKeysSortAsStdSortDoes) {
  ExpectSortedLikeStdSort(Pairs(300000, ~0ull, 1));
}

TEST(KeyOrderTest, SmallIdsInOneBucketWithDuplicatesSortAsStdSortDoes) {
  ExpectSortedLikeStdSort(Pairs(100000, 0xfff, 2));  // ~25 copies a key
}

TEST(KeyOrderTest, KeysVaryingInMiddleBitsOnlySortAsStdSortDoes) {
  std::vector<KeyPosition> v = Pairs(200000, 0xfff00000ull, 4);
  for (KeyPosition& p : v) p.first |= 0x8000000000000001ull;
  ExpectSortedLikeStdSort(v);
}

TEST(KeyOrderTest, OneKeyManyTimesKeepsPositionOrder) {
  std::vector<KeyPosition> v = Pairs(50000, 0, 5);
  v.push_back({1, 50000});
  v.push_back({0, 50001});
  ExpectSortedLikeStdSort(v);
}

// The runs handed out as they are sorted: ascending, together the sorted
// pairs, and no key in two of them; a failure stops the sort.
TEST(KeyOrderTest, RunsComeInOrderAndKeepEachKeyWhole) {
  for (uint64_t mask : {~0ull, 0xfffull}) {
    std::vector<KeyPosition> v = Pairs(200000, mask, 6), scratch;
    std::vector<KeyPosition> want = v, got;
    std::sort(want.begin(), want.end());
    int runs = 0;
    Status s = SortByKey(&v, &scratch, [&](std::span<const KeyPosition> run) {
      EXPECT_FALSE(run.empty());
      if (!got.empty() && !run.empty()) {
        EXPECT_LT(got.back().first, run.front().first);
      }
      got.insert(got.end(), run.begin(), run.end());
      ++runs;
      return Status::OK();
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(got, want);
    EXPECT_GT(runs, 1) << "mask " << mask;
  }
  std::vector<KeyPosition> v = Pairs(200000, ~0ull, 7), scratch;
  int runs = 0;
  Status s = SortByKey(&v, &scratch, [&](std::span<const KeyPosition>) {
    return ++runs == 3 ? Timeout("stop") : Status::OK();
  });
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(runs, 3);
}

TEST(KeyOrderTest, FewPairsSortAsStdSortDoes) {
  ExpectSortedLikeStdSort(Pairs(1000, ~0ull, 3));
  ExpectSortedLikeStdSort({});
}

// A run as HashOrder hands it over: keys that agree on their top 8 bits.
std::vector<KeyPosition> RunOfPairs(size_t n, uint64_t low_mask,
                                    uint64_t seed) {
  std::vector<KeyPosition> v = Pairs(n, low_mask, seed);
  for (KeyPosition& p : v) p.first |= uint64_t{0xa5} << 56;
  return v;
}

void ExpectRunSortedLikeStableSort(std::vector<KeyPosition> v) {
  std::vector<KeyPosition> want = v;
  std::stable_sort(want.begin(), want.end(),
                   [](const KeyPosition& a, const KeyPosition& b) {
                     return a.first < b.first;
                   });
  std::vector<KeyPosition> scratch(v.size());
  SortSpreadRunByKey(v.data(), scratch.data(), v.size(), 56);
  EXPECT_EQ(v, want);
}

TEST(KeyOrderTest, RunsOfSpreadKeysSortAsStableSortDoes) {
  ExpectRunSortedLikeStableSort(RunOfPairs(200000, (uint64_t{1} << 56) - 1, 8));
  ExpectRunSortedLikeStableSort(RunOfPairs(17, (uint64_t{1} << 56) - 1, 9));
  ExpectRunSortedLikeStableSort(RunOfPairs(3, (uint64_t{1} << 56) - 1, 9));
}

TEST(KeyOrderTest, RunsWithDuplicatesKeepEachKeysPositionOrder) {
  // 8,192 keys, ~7 copies each: the counting passes and the insertion keep
  // them in position order.
  ExpectRunSortedLikeStableSort(RunOfPairs(60000, 0x001fff0000000000ull, 10));
}

TEST(KeyOrderTest, RunsCrowdedIntoFewValuesStillSortFully) {
  // Keys that agree on the 16 bits below the run's 8: the counting passes
  // split nothing and the insertion sort would be quadratic; the move
  // budget hands the run to a merge sort.
  ExpectRunSortedLikeStableSort(RunOfPairs(50000, 0xffffffffffull, 11));
}

}  // namespace
}  // namespace ps::worker
