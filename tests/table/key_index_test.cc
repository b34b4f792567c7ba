// KeyIndex against std::unordered_map: random inserts, finds and erases
// (erases shift runs back, also across the array's end), growth, and keys
// of every size, 0 and 2^64 - 1 included; an index owned by the top bits
// of the hash (ExactTable's partitions).
#include "table/key_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <unordered_map>
#include <vector>

namespace ps::table {
namespace {

void ExpectSame(const KeyIndex& index,
                const std::unordered_map<uint64_t, uint32_t>& want) {
  ASSERT_EQ(index.size(), want.size());
  for (const auto& [key, row] : want) ASSERT_EQ(index.Find(key), row) << key;
  size_t seen = 0;
  index.ForEach([&](uint64_t key, uint32_t row) {
    auto it = want.find(key);
    ASSERT_NE(it, want.end()) << key;
    EXPECT_EQ(it->second, row);
    ++seen;
  });
  EXPECT_EQ(seen, want.size());
}

TEST(KeyIndexTest, MatchesAnUnorderedMapUnderRandomInsertsAndErases) {
  for (uint64_t key_range : {uint64_t{64}, uint64_t{5000}, ~uint64_t{0}}) {
    std::mt19937_64 rng(key_range);
    KeyIndex index;
    std::unordered_map<uint64_t, uint32_t> want;
    for (int op = 0; op < 200000; ++op) {
      const uint64_t key =
          key_range == ~uint64_t{0} ? rng() : rng() % key_range;
      if (rng() % 3 == 0) {
        index.Erase(key);
        want.erase(key);
      } else if (want.count(key) == 0) {
        const uint32_t row = static_cast<uint32_t>(rng() % 1000000);
        ASSERT_TRUE(index.Insert(key, row));
        want[key] = row;
      }
      ASSERT_EQ(index.Find(key), want.count(key) ? want[key] : KeyIndex::kNone);
    }
    ExpectSame(index, want);
    for (const auto& [key, row] : std::unordered_map(want)) {
      index.Erase(key);
      want.erase(key);
    }
    ExpectSame(index, want);
  }
}

TEST(KeyIndexTest, ExtremeKeysAndDenseRunsSurviveErases) {
  KeyIndex index;
  std::unordered_map<uint64_t, uint32_t> want;
  // Sequential keys make long runs after mixing only by chance; many of
  // them exercise the wrap-around of the shift.
  for (uint64_t k = 0; k < 10000; ++k) {
    ASSERT_TRUE(index.Insert(k, static_cast<uint32_t>(k)));
    want[k] = static_cast<uint32_t>(k);
  }
  ASSERT_TRUE(index.Insert(~uint64_t{0}, 7));
  want[~uint64_t{0}] = 7;
  for (uint64_t k = 0; k < 10000; k += 2) {
    index.Erase(k);
    want.erase(k);
  }
  index.Erase(123456789);  // absent: nothing
  ExpectSame(index, want);
  EXPECT_EQ(index.Find(0), KeyIndex::kNone);
  EXPECT_EQ(index.Find(~uint64_t{0}), 7u);
}

TEST(KeyIndexTest, AnIndexOwnedByTheTopBitsMatchesAnUnorderedMap) {
  // Keys of one owner (top 6 bits of the hash 0b101010), inserted and
  // erased at random: the slots come from the bits below them.
  std::mt19937_64 rng(3);
  KeyIndex index(70, 6);
  std::unordered_map<uint64_t, uint32_t> want;
  while (want.size() < 20000) {
    const uint64_t key = rng();
    if (KeyIndex::Mix(key) >> 58 != 0b101010) continue;
    ASSERT_TRUE(index.Insert(key, static_cast<uint32_t>(want.size())));
    want[key] = static_cast<uint32_t>(want.size());
  }
  std::vector<uint64_t> keys;
  for (const auto& [key, row] : want) keys.push_back(key);
  for (size_t i = 0; i < keys.size(); i += 3) {
    index.Erase(keys[i]);
    want.erase(keys[i]);
  }
  ExpectSame(index, want);
}

TEST(KeyIndexTest, AnEmptyIndexFindsNothing) {
  KeyIndex index;
  EXPECT_EQ(index.Find(0), KeyIndex::kNone);
  index.Erase(0);
  EXPECT_EQ(index.size(), 0u);
}

}  // namespace
}  // namespace ps::table
