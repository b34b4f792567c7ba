// RowIndex against std::unordered_map, both its probes (one slot a step
// and four, wrapping past the array's end both): random inserts, finds and
// erases (erases leave tombstones, also across the array's end), growth, keys
// of every size, 0 and 2^64 - 1 included; many keys that share a fingerprint,
// told apart by their rows' keys; erases and inserts without end at one
// size; an index owned by the top bits of the hash (ExactTable's partitions);
// two sweeps of keys in hash order and the growth each run reserves beside
// the keys there, and no more for batches over every range; rows past
// kMaxRows refused; growths into arrays made ahead (spares), and spares
// no growth can use dropped.
#include "table/row_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <unordered_map>
#include <vector>

namespace ps::table {
namespace {

// The owner's side: row r's key is keys[r], as an ExactPartition keeps it.
class Owner {
 public:
  explicit Owner(uint32_t max_load = 70, int owner_bits = 0)
      : index_(max_load, owner_bits) {}
  // A new row for `key` (absent); false when the index refused it.
  bool Insert(uint64_t key) {
    uint32_t row;
    if (!free_.empty()) {
      row = free_.back();
      free_.pop_back();
    } else {
      row = static_cast<uint32_t>(keys_.size());
      keys_.push_back(0);
    }
    keys_[row] = key;
    if (!index_.Insert(RowIndex::Mix(key), row, view())) {
      free_.push_back(row);
      return false;
    }
    want_[key] = row;
    return true;
  }
  void Erase(uint64_t key) {
    index_.Erase(key, RowIndex::Mix(key), view());
    auto it = want_.find(key);
    if (it == want_.end()) return;
    free_.push_back(it->second);  // its key stays until the row is reused
    want_.erase(it);
  }
  // Both probes (FindInOrder: four slots a step) find the same row.
  uint32_t Find(uint64_t key) const {
    const uint32_t row = index_.Find(key, RowIndex::Mix(key), view());
    EXPECT_EQ(index_.FindInOrder(key, RowIndex::Mix(key), view()), row)
        << "key " << key;
    return row;
  }
  uint32_t Want(uint64_t key) const {
    auto it = want_.find(key);
    return it == want_.end() ? RowIndex::kNone : it->second;
  }
  void ExpectSame() const {
    ASSERT_EQ(index_.size(), want_.size());
    for (const auto& [key, row] : want_) ASSERT_EQ(Find(key), row) << key;
  }
  const std::unordered_map<uint64_t, uint32_t>& want() const { return want_; }
  RowIndex& index() { return index_; }
  RowKeys view() const { return {keys_.data(), 1}; }

 private:
  RowIndex index_;
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> free_;
  std::unordered_map<uint64_t, uint32_t> want_;
};

TEST(RowIndexTest, MatchesAnUnorderedMapUnderRandomInsertsAndErases) {
  for (uint64_t key_range : {uint64_t{64}, uint64_t{5000}, ~uint64_t{0}}) {
    std::mt19937_64 rng(key_range);
    Owner o;
    for (int op = 0; op < 200000; ++op) {
      const uint64_t key =
          key_range == ~uint64_t{0} ? rng() : rng() % key_range;
      if (rng() % 3 == 0) {
        o.Erase(key);
      } else if (o.Want(key) == RowIndex::kNone) {
        ASSERT_TRUE(o.Insert(key));
      }
      ASSERT_EQ(o.Find(key), o.Want(key));
    }
    o.ExpectSame();
    for (const auto& [key, row] : std::unordered_map(o.want())) o.Erase(key);
    o.ExpectSame();
  }
}

TEST(RowIndexTest, ExtremeKeysAndDenseRunsSurviveErases) {
  Owner o;
  for (uint64_t k = 0; k < 10000; ++k) ASSERT_TRUE(o.Insert(k));
  ASSERT_TRUE(o.Insert(~uint64_t{0}));
  for (uint64_t k = 0; k < 10000; k += 2) o.Erase(k);
  o.Erase(123456789);  // absent: nothing
  o.ExpectSame();
  EXPECT_EQ(o.Find(0), RowIndex::kNone);
  EXPECT_EQ(o.Find(~uint64_t{0}), 10000u);
}

// Keys whose hashes share their low 6 bits (the fingerprint) and lie close
// (the same run of slots): each is found by its own row's key, and absent
// ones with the same fingerprint are not found. Without the key check,
// every lookup here would stop at the run's first row.
TEST(RowIndexTest, KeysOfOneFingerprintAreToldApartByTheirRowsKeys) {
  std::vector<uint64_t> same;
  for (uint64_t k = 0; same.size() < 3000; ++k) {
    if ((RowIndex::Mix(k) & 63) == 17 && RowIndex::Mix(k) >> 56 == 0) {
      same.push_back(k);
    }
  }
  Owner o(90);
  for (size_t i = 0; i < same.size(); i += 2) ASSERT_TRUE(o.Insert(same[i]));
  for (size_t i = 0; i < same.size(); ++i) {
    ASSERT_EQ(o.Find(same[i]), o.Want(same[i])) << i;
  }
  for (size_t i = 0; i < same.size(); i += 4) o.Erase(same[i]);
  o.ExpectSame();
  for (size_t i = 1; i < same.size(); i += 2) {
    ASSERT_EQ(o.Find(same[i]), RowIndex::kNone) << i;
  }
}

// A table at its bound: 1,000 keys with rows, then each new key's row is
// an old key's, so erases and inserts alternate for ever.
class Churn {
 public:
  explicit Churn(uint64_t seed) : rng_(seed), o_(90) {
    for (int i = 0; i < 1000; ++i) {
      live_.push_back(rng_());
      EXPECT_TRUE(o_.Insert(live_.back()));
    }
  }
  // An old key erased (and found no more), a new one inserted.
  void Step() {
    uint64_t& victim = live_[rng_() % live_.size()];
    o_.Erase(victim);
    ASSERT_EQ(o_.Find(victim), RowIndex::kNone);
    victim = rng_();
    ASSERT_TRUE(o_.Insert(victim));
  }
  Owner& owner() { return o_; }

 private:
  std::mt19937_64 rng_;
  Owner o_;
  std::vector<uint64_t> live_;
};

// The tombstones of churn are taken by inserts or cleared by re-filing at
// the same size: the array does not grow.
TEST(RowIndexTest, ChurnAtAFixedSizeLeavesTheArrayItsSize) {
  Churn churn(9);
  Owner& o = churn.owner();
  const size_t bytes = o.index().bytes();
  for (int round = 0; round < 100000; ++round) churn.Step();
  o.ExpectSame();
  EXPECT_EQ(o.index().bytes(), bytes);
}

// Inserts keys until the index wants a spare `lead` percent ahead, and
// returns the slots it wants.
size_t InsertUntilASpareIsWanted(Owner& o, std::mt19937_64& rng,
                                 uint32_t lead) {
  for (int i = 0; i < 100000; ++i) {
    const size_t wanted = o.index().SpareWanted(lead);
    if (wanted != 0) return wanted;
    EXPECT_TRUE(o.Insert(rng()));
  }
  ADD_FAILURE() << "no spare wanted";
  return 0;
}

TEST(RowIndexTest, GrowthsTakeTheSpareMadeAheadForThem) {
  std::mt19937_64 rng(11);
  Owner o(70);
  for (int growth = 0; growth < 6; ++growth) {
    const size_t wanted = InsertUntilASpareIsWanted(o, rng, 10);
    const size_t slots = o.index().bytes() / sizeof(uint32_t);
    ASSERT_EQ(wanted, 2 * slots) << "no tombstones: a doubling";
    RowIndex::Slots spare = RowIndex::EmptySlots(wanted);
    const uint32_t* spare_array = spare.data();
    o.index().AdoptSpare(std::move(spare));
    ASSERT_TRUE(o.index().has_spare());
    EXPECT_EQ(o.index().SpareWanted(10), 0u) << "held already";
    const uint32_t* before = o.index().array();
    while (o.index().array() == before) ASSERT_TRUE(o.Insert(rng()));
    EXPECT_EQ(o.index().array(), spare_array) << "the growth allocated";
    EXPECT_EQ(o.index().bytes(), wanted * sizeof(uint32_t));
    EXPECT_FALSE(o.index().has_spare());
    o.ExpectSame();
  }
}

TEST(RowIndexTest, ARefileAtItsSizeTakesASpareOfThatSize) {
  // Churn: the tombstones fill the array, and it is re-filed at its size.
  Churn churn(12);
  Owner& o = churn.owner();
  const size_t slots = o.index().bytes() / sizeof(uint32_t);
  size_t wanted = 0;
  for (int round = 0; round < 100000 && wanted == 0; ++round) {
    churn.Step();
    wanted = o.index().SpareWanted(5);
  }
  ASSERT_EQ(wanted, slots);
  RowIndex::Slots spare = RowIndex::EmptySlots(wanted);
  const uint32_t* spare_array = spare.data();
  o.index().AdoptSpare(std::move(spare));
  const uint32_t* before = o.index().array();
  for (int round = 0; round < 100000 && o.index().array() == before; ++round) {
    churn.Step();
  }
  EXPECT_EQ(o.index().array(), spare_array) << "the refile allocated";
  EXPECT_EQ(o.index().bytes(), slots * sizeof(uint32_t));
  o.ExpectSame();
}

TEST(RowIndexTest, SparesNoGrowthCanTakeAreDropped) {
  std::mt19937_64 rng(13);
  Owner o(70);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(o.Insert(rng()));
  const size_t slots = o.index().bytes() / sizeof(uint32_t);
  o.index().AdoptSpare(RowIndex::EmptySlots(slots / 2));
  EXPECT_FALSE(o.index().has_spare()) << "smaller than the array";
  o.index().AdoptSpare(RowIndex::Slots());
  EXPECT_FALSE(o.index().has_spare()) << "empty (no memory)";
  // A spare for the next doubling that a larger growth overtakes (a run
  // of keys in hash order reserving room for many) is dropped by it.
  o.index().AdoptSpare(RowIndex::EmptySlots(2 * slots));
  ASSERT_TRUE(o.index().has_spare());
  ASSERT_TRUE(o.index().ReserveForRange(100 * slots, 0, UINT64_MAX, 100 * slots,
                                        o.view()));
  EXPECT_FALSE(o.index().has_spare());
  EXPECT_GT(o.index().bytes(), 4 * slots * sizeof(uint32_t));
  o.ExpectSame();
}

TEST(RowIndexTest, AnIndexOwnedByTheTopBitsMatchesAnUnorderedMap) {
  std::mt19937_64 rng(3);
  Owner o(70, 6);
  while (o.want().size() < 20000) {
    const uint64_t key = rng();
    if (RowIndex::Mix(key) >> 58 != 0b101010) continue;
    ASSERT_TRUE(o.Insert(key));
  }
  std::vector<uint64_t> keys;
  for (const auto& [key, row] : o.want()) keys.push_back(key);
  for (size_t i = 0; i < keys.size(); i += 3) o.Erase(keys[i]);
  o.ExpectSame();
}

// The keys of pushes in hash order, as workers send them: in runs of
// narrow hash ranges, each run reserved for first (ExactPartition::Apply).
// The first sweep of the hashes finds an empty array: its first run,
// spanning 1/140 of them, makes room for 140 such runs at once. The second
// sweep, as many new keys again, must find room beside the keys each range
// holds already: counting only the new keys left the ranges of a second
// push, or of any push at a table's memory bound, fuller than their slots,
// and inserts then probed tens of thousands of slots each. (140,000 keys
// fill 2^18 slots to 53%: the first sweep stays in them, and the second's
// would overfill each range it spans.)
TEST(RowIndexTest, KeysInHashOrderReserveTheirRoomAndAreAllFound) {
  std::mt19937_64 rng(5);
  auto sweep = [&rng] {
    std::vector<uint64_t> keys(140000);
    for (auto& k : keys) k = rng();
    std::sort(keys.begin(), keys.end(), [](uint64_t a, uint64_t b) {
      return RowIndex::Mix(a) < RowIndex::Mix(b);
    });
    return keys;
  };
  Owner o;
  constexpr size_t kRun = 1000;
  for (const auto& keys : {sweep(), sweep()}) {
    for (size_t b = 0; b < keys.size(); b += kRun) {
      const size_t e = std::min(keys.size(), b + kRun);
      ASSERT_TRUE(o.index().ReserveForRange(e - b, RowIndex::Mix(keys[b]),
                                            RowIndex::Mix(keys[e - 1]), 1 << 20,
                                            o.view()));
      if (b == 0) {
        // Room at the 70% bound for the keys there and a sweep like this
        // run (a tenth off for the sampled fill).
        EXPECT_GE(o.index().bytes(),
                  4 * (o.index().size() + keys.size()) * 100 / 70 * 9 / 10)
            << o.index().size() << " keys there";
      }
      for (size_t i = b; i < e; ++i) ASSERT_TRUE(o.Insert(keys[i]));
    }
  }
  o.ExpectSame();
  // At most `most` keys' room, whatever the range says; and a range as
  // wide as all hashes asks for no more than the keys themselves.
  RowIndex capped;
  ASSERT_TRUE(capped.ReserveForRange(1000, 5, 6, 4000, {}));
  EXPECT_LE(capped.bytes(), 4u * 8192);
  RowIndex wide;
  ASSERT_TRUE(wide.ReserveForRange(1000, 0, ~uint64_t{0}, 1 << 20, {}));
  EXPECT_LE(wide.bytes(), 4u * 2048);
}

// Batches that each span every range (a growth bench's, a restore's) ask
// for room for the keys there and theirs, no more: the fill a reserve
// samples is noisy by a few percent, and taken as it is it doubled arrays
// just below their bound early (25.2 bytes a row at 10^8 keys, not 24).
TEST(RowIndexTest, BatchesOverEveryRangeReserveNoMoreThanTheirKeys) {
  std::mt19937_64 rng(11);
  Owner o;
  // 180,000 keys: 69% of 2^18 slots, just below the 70% bound.
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<uint64_t> keys(9000);
    for (auto& k : keys) k = rng();
    std::sort(keys.begin(), keys.end(), [](uint64_t a, uint64_t b) {
      return RowIndex::Mix(a) < RowIndex::Mix(b);
    });
    ASSERT_TRUE(o.index().ReserveForRange(keys.size(), RowIndex::Mix(keys[0]),
                                          RowIndex::Mix(keys.back()), 1 << 20,
                                          o.view()));
    for (uint64_t k : keys) ASSERT_TRUE(o.Insert(k));
  }
  EXPECT_EQ(o.index().bytes(), 4u << 18);
  o.ExpectSame();
}

TEST(RowIndexTest, RowsPastTheSlotsRoomAreRefused) {
  const uint64_t key = 42;
  RowIndex index;
  EXPECT_FALSE(index.Insert(RowIndex::Mix(key), RowIndex::kMaxRows, {&key}));
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.Find(key, RowIndex::Mix(key), {&key}), RowIndex::kNone);
  // The largest row that fits is taken (stride 0: every row's key is
  // `key`).
  ASSERT_TRUE(
      index.Insert(RowIndex::Mix(key), RowIndex::kMaxRows - 1, {&key, 0}));
  EXPECT_EQ(index.Find(key, RowIndex::Mix(key), {&key, 0}),
            RowIndex::kMaxRows - 1);
}

TEST(RowIndexTest, AnEmptyIndexFindsNothing) {
  RowIndex index;
  EXPECT_EQ(index.Find(0, RowIndex::Mix(0), {}), RowIndex::kNone);
  index.Erase(0, RowIndex::Mix(0), {});
  EXPECT_EQ(index.size(), 0u);
}

}  // namespace
}  // namespace ps::table
