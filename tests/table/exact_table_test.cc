// ExactTable: admission by push count, eviction by age, the per-shard memory
// bound, the optimizer applied to admitted rows only, and its checkpoints
// through the Table interface (Snapshot, PrepareRestore, FinishRestore);
// which keys in hash order read as a stream (ExactPartition::Streams).
#include "table/exact_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "table/key_index.h"

namespace ps::table {
namespace {

proto::TableSpec Spec(uint64_t capacity, uint32_t admit, uint64_t evict,
                      uint32_t dim = 2) {
  proto::TableSpec s;
  s.set_id(7);
  s.set_name("ids");
  s.set_kind(proto::EXACT);
  s.set_dim(dim);
  s.set_capacity(capacity);
  s.set_admit_after_pushes(admit);
  s.set_evict_after_steps(evict);
  s.mutable_optimizer()->set_name("sgd");
  s.mutable_optimizer()->set_learning_rate(1.0f);
  return s;
}

// A table of rows of one float that are sums of their gradients.
proto::TableSpec SumSpec(uint64_t capacity) {
  proto::TableSpec s = Spec(capacity, 1, 0, /*dim=*/1);
  s.mutable_optimizer()->set_name("sum");
  return s;
}

// The first n keys, ascending, of partition 0 (the top 6 bits of their
// hash): where one partition's rows are the shard's.
std::vector<uint64_t> KeysOfOnePartition(size_t n) {
  std::vector<uint64_t> same;
  for (uint64_t k = 0; same.size() < n; ++k) {
    if (RowIndex::Mix(k) >> 58 == 0) same.push_back(k);
  }
  return same;
}

std::vector<float> PullOne(ExactTable& t, uint64_t key, bool* present) {
  std::vector<float> out(t.spec().dim());
  bool p[1];
  EXPECT_TRUE(t.ReadKeys(std::vector<uint64_t>{key}, out, p).ok());
  *present = p[0];
  return out;
}

// Keys in hash order read as a stream (no record fetched ahead) only where
// they lie at most kStreamRows rows apart on average.
TEST(ExactPartitionTest, KeysStreamOnlyWhenCloseTogether) {
  constexpr uint64_t kRows = 10000000;
  // The hashes that `rows` of kRows rows spread over all hashes span.
  auto span = [](double rows) {
    return static_cast<uint64_t>(std::ldexp(rows / kRows, 64));
  };
  const uint64_t first = uint64_t{1} << 60;
  // A pull of every key: 4,096 keys over 4,096 rows.
  EXPECT_TRUE(ExactPartition::Streams(4096, first, first + span(4096), kRows));
  EXPECT_TRUE(
      ExactPartition::Streams(4096, first, first + span(15 * 4096), kRows));
  // A training step's 8,500 keys of 10M: ~1,200 rows apart.
  EXPECT_FALSE(
      ExactPartition::Streams(8500, first, first + span(1e7 - 1), kRows));
  EXPECT_FALSE(
      ExactPartition::Streams(4096, first, first + span(17 * 4096), kRows));
  // One key, or keys that do not ascend, never.
  EXPECT_FALSE(ExactPartition::Streams(1, first, first, kRows));
  EXPECT_FALSE(ExactPartition::Streams(4096, first, first - 1, kRows));
}

TEST(ExactTableTest, KeyGetsRowOnItsNthPushAndEarlierPushesAreDropped) {
  auto t = ExactTable::Create(Spec(100, 3, 0)).value();
  const std::vector<uint64_t> key{42};
  const std::vector<float> g{1.0f, 2.0f};
  bool present = true;
  for (int push = 1; push <= 2; ++push) {
    ASSERT_TRUE(t->ApplyKeys(push, key, g).ok());
    EXPECT_FALSE(t->HasRow(42)) << "push " << push;
    auto v = PullOne(*t, 42, &present);
    EXPECT_FALSE(present);
    EXPECT_EQ(v, (std::vector<float>{0.0f, 0.0f}));
  }
  EXPECT_EQ(t->counters().admission_pending, 1u);
  ASSERT_TRUE(t->ApplyKeys(3, key, g).ok());  // admitted: this push applies
  EXPECT_TRUE(t->HasRow(42));
  auto v = PullOne(*t, 42, &present);
  EXPECT_TRUE(present);
  EXPECT_EQ(v, (std::vector<float>{-1.0f, -2.0f}));  // sgd lr 1 from zeros
  ASSERT_TRUE(t->ApplyKeys(4, key, g).ok());
  EXPECT_EQ(PullOne(*t, 42, &present), (std::vector<float>{-2.0f, -4.0f}));
  TableCounters c = t->counters();
  EXPECT_EQ(c.rows, 1u);
  EXPECT_EQ(c.dropped_pushes, 2u);
  EXPECT_EQ(c.admission_pending, 0u);
}

TEST(ExactTableTest, RowsIdleLongerThanTheAgeAreEvictedOnPush) {
  auto t = ExactTable::Create(Spec(100, 1, 5)).value();
  const std::vector<float> g{1.0f, 1.0f};
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{1}, g).ok());
  ASSERT_TRUE(t->ApplyKeys(3, std::vector<uint64_t>{2}, g).ok());
  ASSERT_TRUE(
      t->ApplyKeys(6, std::vector<uint64_t>{3}, g).ok());  // age 5: keep 1
  EXPECT_TRUE(t->HasRow(1));
  ASSERT_TRUE(t->ApplyKeys(7, std::vector<uint64_t>{3}, g).ok());  // 1 is 6 old
  EXPECT_FALSE(t->HasRow(1));
  EXPECT_TRUE(t->HasRow(2));
  EXPECT_TRUE(t->HasRow(3));
  // An update keeps a row young.
  ASSERT_TRUE(t->ApplyKeys(8, std::vector<uint64_t>{2}, g).ok());
  ASSERT_TRUE(t->ApplyKeys(12, std::vector<uint64_t>{3}, g).ok());
  EXPECT_TRUE(t->HasRow(2));
  ASSERT_TRUE(t->ApplyKeys(14, std::vector<uint64_t>{3}, g).ok());
  EXPECT_FALSE(t->HasRow(2));
  TableCounters c = t->counters();
  EXPECT_EQ(c.evicted, 2u);
  EXPECT_EQ(c.rows, 1u);
  // An evicted key starts over: fresh row, from the initializer (zeros).
  ASSERT_TRUE(t->ApplyKeys(14, std::vector<uint64_t>{1}, g).ok());
  bool present = false;
  EXPECT_EQ(PullOne(*t, 1, &present), (std::vector<float>{-1.0f, -1.0f}));
  EXPECT_TRUE(present);
}

// Wall-clock age, on the table's clock (a fake one here): rows not updated
// for more than evict_after_seconds go at the next push, all partitions at
// the first push of a newer second; an update keeps a row young.
TEST(ExactTableTest, RowsIdleLongerThanTheSecondsAreEvictedOnPush) {
  proto::TableSpec spec = Spec(100, 1, 0);
  spec.set_evict_after_seconds(60);
  uint64_t now = 1000;
  ExactTable::Options options;
  options.clock = [&now] { return now; };
  auto t = ExactTable::Create(spec, options).value();
  const std::vector<float> g{1.0f, 1.0f};
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{1}, g).ok());
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{2}, g).ok());
  now = 1030;
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{3}, g).ok());
  now = 1060;  // 60 s idle: not more than the age
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{2}, g).ok());
  EXPECT_TRUE(t->HasRow(1));
  now = 1061;  // key 1: 61 s; key 2 was updated at 1060, key 3 at 1030
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{4}, g).ok());
  EXPECT_FALSE(t->HasRow(1));
  EXPECT_TRUE(t->HasRow(2));
  EXPECT_TRUE(t->HasRow(3));
  EXPECT_TRUE(t->HasRow(4));
  now = 1121;  // a push sweeps every partition: 2 and 3 go, 4 (60 s) stays
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{4}, g).ok());
  EXPECT_FALSE(t->HasRow(2));
  EXPECT_FALSE(t->HasRow(3));
  EXPECT_TRUE(t->HasRow(4));
  TableCounters c = t->counters();
  EXPECT_EQ(c.evicted, 3u);
  EXPECT_EQ(c.rows, 1u);
}

TEST(ExactTableTest, MemoryBoundRefusesNewKeysUntilEvictionFreesRows) {
  proto::TableSpec spec = Spec(3, 1, 10);
  spec.set_when_full(proto::WHEN_FULL_REFUSE);
  auto t = ExactTable::Create(spec).value();
  const std::vector<float> g(4 * 2, 1.0f);
  const std::vector<uint64_t> keys{10, 11, 12, 13};
  ASSERT_TRUE(t->ApplyKeys(1, keys, g).ok());
  // Three of the four get rows (which: the order of their partitions).
  EXPECT_EQ(std::count_if(keys.begin(), keys.end(),
                          [&](uint64_t k) { return t->HasRow(k); }),
            3);
  TableCounters c = t->counters();
  EXPECT_EQ(c.rows, 3u);
  EXPECT_EQ(c.refused_full, 1u);
  EXPECT_EQ(c.dropped_pushes, 1u);
  // Still full: refused again, old rows untouched.
  ASSERT_TRUE(
      t->ApplyKeys(5, std::vector<uint64_t>{14}, std::vector<float>{1.0f, 1.0f})
          .ok());
  EXPECT_FALSE(t->HasRow(14));
  // Step 20: all three are 19 steps idle, evicted; the new key fits.
  ASSERT_TRUE(t->ApplyKeys(20, std::vector<uint64_t>{14},
                           std::vector<float>{1.0f, 1.0f})
                  .ok());
  EXPECT_TRUE(t->HasRow(14));
  for (uint64_t k : keys) EXPECT_FALSE(t->HasRow(k)) << k;
  c = t->counters();
  EXPECT_EQ(c.rows, 1u);
  EXPECT_EQ(c.evicted, 3u);
}

// The default at the bound: a new key takes the least recently updated row
// of its partition. Keys of one partition make that the shard's LRU row.
TEST(ExactTableTest, AtTheBoundANewKeyTakesTheLeastRecentlyUpdatedRow) {
  auto t = ExactTable::Create(Spec(3, 1, 0)).value();
  const std::vector<uint64_t> same = KeysOfOnePartition(5);
  const std::vector<float> g{1.0f, 1.0f};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t->ApplyKeys(i + 1, std::vector<uint64_t>{same[i]}, g).ok());
  }
  // same[0] is updated again: same[1] is now the least recent.
  ASSERT_TRUE(t->ApplyKeys(4, std::vector<uint64_t>{same[0]}, g).ok());
  ASSERT_TRUE(t->ApplyKeys(5, std::vector<uint64_t>{same[3]}, g).ok());
  EXPECT_TRUE(t->HasRow(same[3]));
  EXPECT_FALSE(t->HasRow(same[1]));
  EXPECT_TRUE(t->HasRow(same[0]));
  EXPECT_TRUE(t->HasRow(same[2]));
  TableCounters c = t->counters();
  EXPECT_EQ(c.rows, 3u);
  EXPECT_EQ(c.evicted, 1u);
  EXPECT_EQ(c.refused_full, 0u);
  // The freed row starts over for its new key: from the initializer.
  bool present = false;
  EXPECT_EQ(PullOne(*t, same[3], &present), (std::vector<float>{-1.0f, -1.0f}));
}

// The same in a partition of more rows than a victim search compares: the
// least recently used of the kVictimWindow rows from the hand on goes, not
// the first of them nor one past them.
TEST(ExactTableTest, AtTheBoundANewKeyTakesTheLeastRecentRowOfTheWindow) {
  constexpr size_t kRows = 2 * ExactPartition::kVictimWindow;
  auto t = ExactTable::Create(Spec(kRows, 1, 0)).value();
  const std::vector<uint64_t> same = KeysOfOnePartition(kRows + 1);
  const std::vector<float> g{1.0f, 1.0f};
  // One push each: row i is same[i]'s.
  for (size_t i = 0; i < kRows; ++i) {
    ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{same[i]}, g).ok());
  }
  // Every row used again but one inside the first window and one past it.
  constexpr size_t kInside = 5, kPast = ExactPartition::kVictimWindow + 8;
  std::vector<uint64_t> again;
  for (size_t i = 0; i < kRows; ++i) {
    if (i != kInside && i != kPast) again.push_back(same[i]);
  }
  ASSERT_TRUE(
      t->ApplyKeys(2, again, std::vector<float>(2 * again.size(), 1)).ok());
  ASSERT_TRUE(t->ApplyKeys(3, std::vector<uint64_t>{same[kRows]}, g).ok());
  EXPECT_TRUE(t->HasRow(same[kRows]));
  EXPECT_FALSE(t->HasRow(same[kInside]));
  EXPECT_TRUE(t->HasRow(same[kPast]));
  EXPECT_TRUE(t->HasRow(same[0]));
  EXPECT_EQ(t->counters().evicted, 1u);
}

TEST(ExactTableTest, RowBudgetTakesBatchesOnlyFarFromItsBound) {
  RowBudget budget(100);
  EXPECT_TRUE(budget.TakeBatch(30));
  EXPECT_TRUE(budget.TakeBatch(20));   // 50 used, 50 left: 20 more stay free
  EXPECT_FALSE(budget.TakeBatch(30));  // 30 would leave fewer than 30 free
  budget.Give(50);
  EXPECT_FALSE(budget.TakeBatch(51));  // more than half the bound: never
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(budget.Take()) << i;
  EXPECT_FALSE(budget.Take());
  EXPECT_FALSE(budget.TakeBatch(1));
}

// Each partition takes rows for a push's keys without rows in one batch and
// gives back what it did not use (here: the second of each key's two
// occurrences finds the row the first made): a table then fills to exactly
// its bound without an eviction.
TEST(ExactTableTest, PushesFillTheBoundExactlyWithoutEvicting) {
  auto t = ExactTable::Create(Spec(3000, 1, 0)).value();
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 1500; ++k) keys.insert(keys.end(), {k, k});
  ASSERT_TRUE(
      t->ApplyKeys(1, keys, std::vector<float>(2 * keys.size(), 1)).ok());
  EXPECT_EQ(t->counters().rows, 1500u);
  keys.clear();
  for (uint64_t k = 1500; k < 3000; ++k) keys.push_back(k);
  ASSERT_TRUE(
      t->ApplyKeys(2, keys, std::vector<float>(2 * keys.size(), 1)).ok());
  TableCounters c = t->counters();
  EXPECT_EQ(c.rows, 3000u);
  EXPECT_EQ(c.evicted, 0u);
  EXPECT_EQ(c.refused_full, 0u);
  bool present = false;
  EXPECT_EQ(PullOne(*t, 7, &present), (std::vector<float>{-2.0f, -2.0f}));
  EXPECT_TRUE(present);
  // One more new key: exactly one row is taken from the oldest.
  ASSERT_TRUE(t->ApplyKeys(3, std::vector<uint64_t>{5000},
                           std::vector<float>{1.0f, 1.0f})
                  .ok());
  c = t->counters();
  EXPECT_EQ(c.rows, 3000u);
  EXPECT_EQ(c.evicted, 1u);
}

// The bound is the shard's, and so is the LRU: a key whose partition holds
// no row (or only newer ones) takes the least recently updated row of
// another partition.
TEST(ExactTableTest, AtTheBoundTheShardsLeastRecentRowGoesWhicheverPartition) {
  auto t = ExactTable::Create(Spec(3, 1, 0)).value();
  // Keys of four different partitions (the top 6 hash bits).
  std::vector<uint64_t> keys;
  std::vector<uint64_t> partitions;
  for (uint64_t k = 0; keys.size() < 4; ++k) {
    const uint64_t p = RowIndex::Mix(k) >> 58;
    if (std::find(partitions.begin(), partitions.end(), p) != partitions.end())
      continue;
    partitions.push_back(p);
    keys.push_back(k);
  }
  const std::vector<float> g{1.0f, 1.0f};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t->ApplyKeys(i + 1, std::vector<uint64_t>{keys[i]}, g).ok());
  }
  // keys[0] is updated again: keys[1] is now the shard's least recent.
  ASSERT_TRUE(t->ApplyKeys(4, std::vector<uint64_t>{keys[0]}, g).ok());
  // keys[3]'s partition is empty: keys[1]'s row goes.
  ASSERT_TRUE(t->ApplyKeys(5, std::vector<uint64_t>{keys[3]}, g).ok());
  EXPECT_TRUE(t->HasRow(keys[3]));
  EXPECT_FALSE(t->HasRow(keys[1]));
  EXPECT_TRUE(t->HasRow(keys[0]));
  EXPECT_TRUE(t->HasRow(keys[2]));
  TableCounters c = t->counters();
  EXPECT_EQ(c.rows, 3u);
  EXPECT_EQ(c.evicted, 1u);
  EXPECT_EQ(c.refused_full, 0u);
  // keys[1] comes back: now keys[2]'s row (step 3) is the oldest.
  ASSERT_TRUE(t->ApplyKeys(6, std::vector<uint64_t>{keys[1]}, g).ok());
  EXPECT_TRUE(t->HasRow(keys[1]));
  EXPECT_FALSE(t->HasRow(keys[2]));
  EXPECT_TRUE(t->HasRow(keys[0]));
  EXPECT_TRUE(t->HasRow(keys[3]));
}

// A push of more new keys of one partition than the bound holds: each
// gradient lands on its own key's row, never on a row the same push updated
// for a key it then evicted (the evicted key's gradient is not carried over
// to the key that takes its row).
TEST(ExactTableTest, APushThatEvictsItsOwnRowsAppliesEachGradientToItsKey) {
  auto t = ExactTable::Create(SumSpec(2)).value();
  const std::vector<uint64_t> same = KeysOfOnePartition(5);
  const std::vector<float> g{1.0f, 10.0f, 100.0f, 1000.0f, 10000.0f};
  ASSERT_TRUE(t->ApplyKeys(1, same, g).ok());
  // Two rows: the last two keys hold them, each with its own gradient.
  for (size_t i = 0; i < same.size(); ++i) {
    bool present = false;
    const std::vector<float> row = PullOne(*t, same[i], &present);
    if (present) {
      EXPECT_EQ(row[0], g[i]) << "key " << i;
    }
  }
  EXPECT_EQ(t->counters().rows, 2u);
}

// The same in a partition of more rows than a victim search compares
// (ExactPartition::kVictimWindow): the rows a push has gathered are pinned
// wherever the hand finds them, so the rows of the earlier push go first,
// and then, once every row waits, the gathered ones are applied before any
// is taken.
TEST(ExactTableTest, APushLargerThanTheVictimWindowNeverTakesARowItGathered) {
  constexpr size_t kBound = 100, kNew = 300;
  auto t = ExactTable::Create(SumSpec(kBound)).value();
  const std::vector<uint64_t> same = KeysOfOnePartition(kBound + kNew);
  const std::vector<uint64_t> old(same.begin(), same.begin() + kBound);
  const std::vector<uint64_t> fresh(same.begin() + kBound, same.end());
  ASSERT_TRUE(t->ApplyKeys(1, old, std::vector<float>(kBound, 1.0f)).ok());
  std::vector<float> g(kNew);
  for (size_t i = 0; i < kNew; ++i) g[i] = static_cast<float>(i + 2);
  ASSERT_TRUE(t->ApplyKeys(2, fresh, g).ok());
  for (uint64_t k : old) EXPECT_FALSE(t->HasRow(k)) << k;
  size_t present_rows = 0;
  for (size_t i = 0; i < kNew; ++i) {
    bool present = false;
    const std::vector<float> row = PullOne(*t, fresh[i], &present);
    if (!present) continue;
    ++present_rows;
    EXPECT_EQ(row[0], g[i]) << "key " << i;
  }
  EXPECT_EQ(present_rows, kBound);
  const TableCounters c = t->counters();
  EXPECT_EQ(c.rows, kBound);
  EXPECT_EQ(c.evicted, kNew);
  EXPECT_EQ(c.refused_full, 0u);
}

// A victim search whose window from the hand holds only rows the push has
// taken for its new keys (pinned until applied) passes over them to the
// rows beyond. Rows 0-31 are the oldest, then row 63; rows 32-62 are
// updated by the push before its new keys take rows 0-31 and then row 63
// in turn: the hand is then back at row 0, whose window holds only rows
// of this push, and the next new key must take one of rows 32-62.
TEST(ExactTableTest, AVictimSearchPassesOverAWindowOfRowsThePushTook) {
  constexpr size_t kWindow = ExactPartition::kVictimWindow;
  constexpr size_t kRows = 2 * kWindow, kNew = kWindow + 2;
  auto t = ExactTable::Create(SumSpec(kRows)).value();
  const std::vector<uint64_t> same = KeysOfOnePartition(kRows + kNew);
  // One push each: row i is same[i]'s.
  for (size_t i = 0; i < kRows; ++i) {
    ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{same[i]},
                             std::vector<float>{1.0f})
                    .ok());
  }
  std::vector<uint64_t> keys(same.begin() + kWindow, same.end() - kNew - 1);
  const size_t updated = keys.size();
  keys.insert(keys.end(), same.end() - kNew, same.end());
  std::vector<float> g;
  for (size_t i = 0; i < keys.size(); ++i) g.push_back(100.0f + i);
  ASSERT_TRUE(t->ApplyKeys(2, keys, g).ok());
  // Every new key holds its own gradient (none landed on a row taken from
  // another new key), and the rows freed were 0-31, 63 and one of 32-62.
  for (size_t i = updated; i < keys.size(); ++i) {
    bool present = false;
    EXPECT_EQ(PullOne(*t, keys[i], &present), std::vector<float>{g[i]})
        << "new key " << i - updated;
    EXPECT_TRUE(present) << "new key " << i - updated;
  }
  size_t updated_left = 0;
  for (size_t i = 0; i < updated; ++i) updated_left += t->HasRow(keys[i]);
  EXPECT_EQ(updated_left, updated - 1);
  for (size_t i = 0; i < kWindow; ++i) EXPECT_FALSE(t->HasRow(same[i])) << i;
  EXPECT_FALSE(t->HasRow(same[kRows - 1]));
  EXPECT_EQ(t->counters().evicted, kNew);
}

// Eviction by age in a partition of more rows than one sweep visits
// (ExactPartition::kMinIdleSweep): the sweep goes round them, and a row
// idle past evict_after_steps is freed within that many steps more.
TEST(ExactTableTest, AnIdleSweepGoesRoundALargePartitionWithinAPeriod) {
  constexpr uint64_t kEvict = 10;
  constexpr size_t kRows = 3 * ExactPartition::kMinIdleSweep;
  auto t = ExactTable::Create(Spec(1 << 20, 1, kEvict, 1)).value();
  const std::vector<uint64_t> same = KeysOfOnePartition(kRows);
  ASSERT_TRUE(t->ApplyKeys(1, same, std::vector<float>(kRows, 1.0f)).ok());
  // One key of another partition each step: the table's sweeps.
  uint64_t other = 0;
  while (RowIndex::Mix(other) >> 58 == 0) ++other;
  const std::vector<uint64_t> one{other};
  for (uint64_t step = 2; step <= 1 + kEvict; ++step) {
    ASSERT_TRUE(t->ApplyKeys(step, one, std::vector<float>{1.0f}).ok());
  }
  EXPECT_EQ(t->counters().evicted, 0u);  // none idle yet
  EXPECT_EQ(t->counters().rows, kRows + 1);
  for (uint64_t step = 2 + kEvict; step <= 1 + 2 * kEvict; ++step) {
    ASSERT_TRUE(t->ApplyKeys(step, one, std::vector<float>{1.0f}).ok());
  }
  const TableCounters c = t->counters();
  EXPECT_EQ(c.evicted, kRows);
  EXPECT_EQ(c.rows, 1u);
  EXPECT_TRUE(t->HasRow(other));
}

TEST(ExactTableTest, DuplicateKeysInOnePushAddUp) {
  auto t = ExactTable::Create(Spec(10, 2, 0, 1)).value();
  // The second occurrence admits the key and applies; the first is dropped.
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{5, 5, 5},
                           std::vector<float>{1, 2, 4})
                  .ok());
  bool present = false;
  EXPECT_EQ(PullOne(*t, 5, &present), std::vector<float>{-6.0f});
}

// Keys that come in hash order with their hashes (as keyed packets of
// hashes carry them) land in the partitions and rows ApplyKeys gives them:
// every key of a push, in every partition, summed once.
TEST(ExactTableTest, KeysWithTheirHashesApplyAsKeysDo) {
  std::vector<uint64_t> keys(50000);
  std::iota(keys.begin(), keys.end(), uint64_t{1} << 40);
  std::sort(keys.begin(), keys.end(), [](uint64_t a, uint64_t b) {
    return RowIndex::Mix(a) < RowIndex::Mix(b);
  });
  std::vector<uint64_t> hashes;
  std::vector<float> grads;
  for (uint64_t k : keys) {
    hashes.push_back(RowIndex::Mix(k));
    grads.push_back(static_cast<float>(k % 7 + 1));
  }
  auto hashed = ExactTable::Create(SumSpec(100000)).value();
  auto plain = ExactTable::Create(SumSpec(100000)).value();
  for (uint64_t step = 1; step <= 2; ++step) {
    ASSERT_TRUE(hashed->ApplyHashedKeys(step, keys, hashes, grads).ok());
    ASSERT_TRUE(plain->ApplyKeys(step, keys, grads).ok());
  }
  EXPECT_EQ(hashed->counters().rows, keys.size());
  std::vector<float> a(keys.size()), b(keys.size());
  std::unique_ptr<bool[]> pa(new bool[keys.size()]), pb(new bool[keys.size()]);
  ASSERT_TRUE(
      hashed->ReadKeys(keys, a, std::span<bool>(pa.get(), keys.size())).ok());
  ASSERT_TRUE(
      plain->ReadKeys(keys, b, std::span<bool>(pb.get(), keys.size())).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(pa[i] && pb[i]) << keys[i];
    ASSERT_EQ(a[i], 2 * grads[i]) << keys[i];
    ASSERT_EQ(a[i], b[i]) << keys[i];
  }
  // Hashes that do not match the keys in number: nothing applied.
  const Status s = hashed->ApplyHashedKeys(
      3, keys, std::span<const uint64_t>(hashes).first(10), grads);
  EXPECT_TRUE(s.Is(StatusCode::kInvalidArgument)) << s;
  bool present = false;
  EXPECT_EQ(PullOne(*hashed, keys[0], &present),
            std::vector<float>{2 * grads[0]});
}

TEST(ExactTableTest, BadInputIsAStatus) {
  EXPECT_FALSE(ExactTable::Create([] {
                 auto s = Spec(10, 1, 0);
                 s.set_kind(proto::HASHED);
                 return s;
               }())
                   .ok());
  EXPECT_FALSE(ExactTable::Create(Spec(10, 0, 0)).ok());  // admit 0
  auto t = ExactTable::Create(Spec(10, 1, 0)).value();
  EXPECT_TRUE(
      t->ApplyKeys(1, std::vector<uint64_t>{1}, std::vector<float>{1.0f})
          .Is(StatusCode::kInvalidArgument));  // 1 value for dim 2
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(
      t->ApplyKeys(1, std::vector<uint64_t>{1}, std::vector<float>{1.0f, nan})
          .Is(StatusCode::kInvalidArgument));
  EXPECT_FALSE(t->HasRow(1));
  std::vector<float> out(3);
  bool p[1];
  EXPECT_FALSE(t->ReadKeys(std::vector<uint64_t>{1}, out, p).ok());
}

TEST(ExactTableTest, SnapshotRestoresKeysRowsStateAndAgeOrder) {
  proto::TableSpec spec = Spec(10, 1, 5);
  spec.mutable_optimizer()->set_name("adagrad");
  spec.mutable_optimizer()->set_learning_rate(0.5f);
  auto t = ExactTable::Create(spec).value();
  ASSERT_TRUE(t->ApplyKeys(1, std::vector<uint64_t>{1, 2},
                           std::vector<float>{1, 2, 3, 4})
                  .ok());
  ASSERT_TRUE(
      t->ApplyKeys(4, std::vector<uint64_t>{2}, std::vector<float>{1, 1}).ok());
  TableSnapshot saved;
  ASSERT_TRUE(t->Snapshot(&saved).ok());
  EXPECT_EQ(saved.ids.size(), 2u);
  EXPECT_EQ(saved.state_arrays, 1);
  EXPECT_EQ(saved.optimizer_steps, 2u);

  // Into a fresh table that holds other rows: those go, the saved ones come.
  auto restored = ExactTable::Create(spec).value();
  ASSERT_TRUE(
      restored->ApplyKeys(1, std::vector<uint64_t>{9}, std::vector<float>{1, 1})
          .ok());
  TableTarget target;
  target.spec = spec;
  ASSERT_TRUE(restored->PrepareRestore(&target).ok());
  EXPECT_EQ(target.state_arrays, 1);
  target.exact = saved;
  target.optimizer_steps = saved.optimizer_steps;
  ASSERT_TRUE(restored->FinishRestore(&target).ok());
  EXPECT_FALSE(restored->HasRow(9));
  for (uint64_t key : {1, 2}) {
    bool present = false, was = false;
    EXPECT_EQ(PullOne(*restored, key, &present), PullOne(*t, key, &was));
    EXPECT_TRUE(present);
  }
  // The same next update on both: state and step count came back too.
  const std::vector<float> g{0.5f, -0.5f};
  ASSERT_TRUE(t->ApplyKeys(5, std::vector<uint64_t>{2}, g).ok());
  ASSERT_TRUE(restored->ApplyKeys(5, std::vector<uint64_t>{2}, g).ok());
  bool present = false;
  EXPECT_EQ(PullOne(*restored, 2, &present), PullOne(*t, 2, &present));
  // Key 1 (last updated at step 1) is the older: at step 7 it is 6 idle.
  ASSERT_TRUE(restored->ApplyKeys(7, std::vector<uint64_t>{2}, g).ok());
  EXPECT_FALSE(restored->HasRow(1));
  EXPECT_TRUE(restored->HasRow(2));
}

TEST(ExactTableTest, RestoreBeyondTheCapacityIsResourceExhausted) {
  auto t = ExactTable::Create(Spec(2, 1, 0)).value();
  TableTarget target;
  ASSERT_TRUE(t->PrepareRestore(&target).ok());
  target.exact.ids = {1, 2, 3};
  target.exact.values.assign(3 * 2, 1.0f);
  target.exact.last_update = {1, 1, 1};
  EXPECT_TRUE(t->FinishRestore(&target).Is(StatusCode::kResourceExhausted));
}

TEST(ExactTableTest, TheTableInterfaceSaysWhatAKeyedTableCannotDo) {
  auto t = ExactTable::Create(Spec(10, 1, 0)).value();
  Table& table = *t;
  EXPECT_EQ(table.access(), RowAccess::kThroughServer);
  std::vector<uint32_t> rows{0};
  std::vector<float> grads{1.0f, 1.0f};
  EXPECT_TRUE(table.ApplyRows(1, rows, grads, kernels::AccumulateMode::kAtomic)
                  .Is(StatusCode::kNotSupported));
  protocol::SparsePacketHeader header;
  EXPECT_TRUE(table.ApplyPacket({}, {}, &header).Is(StatusCode::kNotSupported));
}

}  // namespace
}  // namespace ps::table
