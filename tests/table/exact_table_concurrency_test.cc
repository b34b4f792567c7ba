// ExactTable from many threads at once, as a server's apply threads and
// control connections call it: writers apply to keys of their own, an
// evictor pushes short-lived keys at rising steps (so eviction sweeps run
// beside everything else), readers and a snapshotter read rows meanwhile.
// Every row read must be whole (each push adds {1, 2}: a row is {n, 2n}),
// and at the end every writer's key holds exactly its pushes: no update is
// lost or applied twice, whatever the partitions' interleaving. Calls of
// kParallelKeys keys of one float or more (as many bytes of keys and rows:
// fewer keys of wider rows) split over the table's threads: their results
// equal a table's that runs them on one thread, and under concurrent
// callers no update is lost. Key indexes that grow into arrays made ahead
// by the table's spares thread (table/index_spares.h) lose no key and show
// no reader a wrong row. Run under TSan by the concurrency label.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "table/exact_table.h"
#include "table/key_index.h"

namespace ps::table {
namespace {

constexpr int kWriters = 3;
constexpr uint64_t kKeysPerWriter = 1500;
constexpr int kRounds = 150;
constexpr size_t kBatch = 200;
// Writers push at a step the evictor never comes near: their rows stay.
constexpr uint64_t kWriterStep = uint64_t{1} << 40;

// Eviction frees rows oldest-updated first and stops at the first row young
// enough, which assumes steps rise with time, as a job's do. The writers'
// fixed step would break that for rows beside theirs, so writers and
// evictor keep to halves of the partitions (the high bit of the hash that
// picks one).
bool InWriterHalf(uint64_t key) { return (RowIndex::Mix(key) >> 63) == 0; }

// Keys from `first` on (stride 1) that fall in the wanted half.
std::vector<uint64_t> KeysInHalf(uint64_t first, size_t n, bool writer_half) {
  std::vector<uint64_t> keys;
  for (uint64_t k = first; keys.size() < n; ++k) {
    if (InWriterHalf(k) == writer_half) keys.push_back(k);
  }
  return keys;
}

std::vector<uint64_t> EvictorKeys(uint64_t step) {
  return KeysInHalf(step << 20, 64, false);
}

proto::TableSpec Spec() {
  proto::TableSpec s;
  s.set_id(1);
  s.set_name("ids");
  s.set_kind(proto::EXACT);
  s.set_dim(2);
  s.set_capacity(1 << 16);
  s.set_admit_after_pushes(1);
  s.set_evict_after_steps(2);
  s.mutable_optimizer()->set_name("sum");
  return s;
}

// "" when every present row is {n, 2n} with n a whole number >= 1.
std::string CheckRows(const std::vector<float>& v,
                      const std::vector<bool>& present) {
  for (size_t i = 0; i < present.size(); ++i) {
    if (!present[i]) continue;
    const float a = v[2 * i], b = v[2 * i + 1];
    if (b != 2 * a || a < 1 || a != static_cast<float>(static_cast<int>(a))) {
      return "row " + std::to_string(i) + " is {" + std::to_string(a) + ", " +
             std::to_string(b) + "}";
    }
  }
  return "";
}

TEST(ExactTableConcurrencyTest, ApplyReadEvictAndSnapshotAtOnce) {
  auto table = ExactTable::Create(Spec()).value();
  std::atomic<bool> stop{false};
  std::atomic<int> problems{0};
  std::vector<std::vector<uint32_t>> pushes(
      kWriters, std::vector<uint32_t>(kKeysPerWriter, 0));
  std::vector<std::vector<uint64_t>> writer_keys;
  for (int w = 0; w < kWriters; ++w) {
    writer_keys.push_back(
        KeysInHalf(uint64_t(w + 1) << 40, kKeysPerWriter, true));
  }

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      std::vector<uint64_t> keys(kBatch);
      const std::vector<float> grads = [] {
        std::vector<float> g;
        for (size_t i = 0; i < kBatch; ++i) g.insert(g.end(), {1.0f, 2.0f});
        return g;
      }();
      for (int r = 0; r < kRounds; ++r) {
        for (auto& k : keys) {
          const uint64_t i = rng() % kKeysPerWriter;
          k = writer_keys[w][i];
          ++pushes[w][i];
        }
        if (!table->ApplyKeys(kWriterStep, keys, grads).ok()) ++problems;
      }
    });
  }
  threads.emplace_back([&] {
    // Short-lived keys at rising steps: each step's sweep frees the rows
    // of two steps before.
    const std::vector<float> grads(2 * 64, 1.0f);
    for (uint64_t step = 1; step <= 300; ++step) {
      const std::vector<uint64_t> keys = EvictorKeys(step);
      if (!table->ApplyKeys(step, keys, grads).ok()) ++problems;
    }
  });
  auto read_until_stopped = [&](int seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> keys(kBatch);
    std::vector<float> out(2 * kBatch);
    std::unique_ptr<bool[]> present(new bool[kBatch]);
    while (!stop.load()) {
      for (auto& k : keys) {
        k = writer_keys[rng() % kWriters][rng() % kKeysPerWriter];
      }
      if (!table->ReadKeys(keys, out, {present.get(), kBatch}).ok()) {
        ++problems;
        continue;
      }
      std::string bad = CheckRows(
          out, std::vector<bool>(present.get(), present.get() + kBatch));
      if (!bad.empty()) {
        ADD_FAILURE() << "a reader saw " << bad;
        ++problems;
      }
    }
  };
  std::thread reader1(read_until_stopped, 100),
      reader2(read_until_stopped, 101);
  std::thread snapshotter([&] {
    while (!stop.load()) {
      TableSnapshot snap;
      if (!table->Snapshot(&snap).ok()) ++problems;
      std::vector<float> mine;
      std::vector<bool> present;
      for (size_t i = 0; i < snap.ids.size(); ++i) {
        if (!InWriterHalf(snap.ids[i])) continue;  // an evictor key
        mine.insert(mine.end(), {snap.values[2 * i], snap.values[2 * i + 1]});
        present.push_back(true);
      }
      std::string bad = CheckRows(mine, present);
      if (!bad.empty()) {
        ADD_FAILURE() << "a snapshot held " << bad;
        ++problems;
      }
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  reader1.join();
  reader2.join();
  snapshotter.join();
  EXPECT_EQ(problems.load(), 0);

  // Every writer key holds exactly its pushes.
  uint64_t expected_rows = 0;
  for (int w = 0; w < kWriters; ++w) {
    const std::vector<uint64_t>& keys = writer_keys[w];
    std::vector<float> out(2 * kKeysPerWriter);
    std::unique_ptr<bool[]> present(new bool[kKeysPerWriter]);
    ASSERT_TRUE(
        table->ReadKeys(keys, out, {present.get(), kKeysPerWriter}).ok());
    for (uint64_t i = 0; i < kKeysPerWriter; ++i) {
      const uint32_t n = pushes[w][i];
      ASSERT_EQ(present[i], n > 0) << "writer " << w << " key " << i;
      ASSERT_EQ(out[2 * i], static_cast<float>(n))
          << "writer " << w << " key " << i;
      ASSERT_EQ(out[2 * i + 1], 2.0f * n);
      expected_rows += n > 0;
    }
  }
  // Beside them, only the evictor's rows that no sweep freed yet.
  std::vector<uint64_t> last_keys;
  for (uint64_t step = 1; step <= 300; ++step) {
    for (uint64_t k : EvictorKeys(step)) last_keys.push_back(k);
  }
  std::vector<float> out(2 * last_keys.size());
  std::unique_ptr<bool[]> present(new bool[last_keys.size()]);
  ASSERT_TRUE(
      table->ReadKeys(last_keys, out, {present.get(), last_keys.size()}).ok());
  const uint64_t evictor_rows =
      std::count(present.get(), present.get() + last_keys.size(), true);
  const TableCounters c = table->counters();
  EXPECT_EQ(c.rows, expected_rows + evictor_rows);
  EXPECT_EQ(c.evicted, 300 * 64 - evictor_rows);
  EXPECT_GT(c.evicted, 0u);
}

// At the bound, pushers of fresh keys take each other's rows across
// partitions (ExactPartition::TryRetireOldest, with their own partition's
// lock held) while readers read: no deadlock, no row read torn, and every
// key pushed is accounted for, holding a row or evicted: none refused. A
// pusher that finds its own partition without rows and every other busy
// takes a row beyond the bound, which later pushes give back.
TEST(ExactTableConcurrencyTest, AtTheBoundPartitionsTakeEachOthersRows) {
  proto::TableSpec spec = Spec();
  spec.set_capacity(64);
  spec.set_evict_after_steps(0);
  auto table = ExactTable::Create(spec).value();
  constexpr int kPushers = 3, kPushRounds = 60, kKeys = 50;
  std::atomic<int> problems{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kPushers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> grads;
      for (int i = 0; i < kKeys; ++i) grads.insert(grads.end(), {1.0f, 2.0f});
      for (int r = 0; r < kPushRounds; ++r) {
        std::vector<uint64_t> keys;
        for (int i = 0; i < kKeys; ++i) {
          keys.push_back((uint64_t{1} << 32) * (w + 1) + r * kKeys + i);
        }
        std::sort(keys.begin(), keys.end());
        if (!table->ApplyKeys(r + 1, keys, grads).ok()) ++problems;
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937_64 rng(3);
    std::vector<uint64_t> keys(kKeys);
    std::vector<float> out(2 * kKeys);
    std::unique_ptr<bool[]> present(new bool[kKeys]);
    while (!done.load()) {
      for (auto& k : keys) {
        k = (uint64_t{1} << 32) * (1 + rng() % kPushers) +
            rng() % (kPushRounds * kKeys);
      }
      if (!table->ReadKeys(keys, out, {present.get(), keys.size()}).ok()) {
        ++problems;
      }
      if (!CheckRows(out,
                     std::vector<bool>(present.get(), present.get() + kKeys))
               .empty()) {
        ++problems;
      }
    }
  });
  for (int w = 0; w < kPushers; ++w) threads[w].join();
  done = true;
  threads.back().join();
  EXPECT_EQ(problems.load(), 0);
  const TableCounters c = table->counters();
  EXPECT_EQ(c.refused_full, 0u);
  EXPECT_EQ(c.rows + c.evicted, uint64_t{kPushers} * kPushRounds * kKeys);
  EXPECT_GT(c.evicted, 0u);
  // Pushes without contention give back any rows taken beyond the bound.
  std::vector<float> grads(2 * kKeys, 1.0f);
  for (int r = 0; r < 4; ++r) {
    std::vector<uint64_t> keys;
    for (int i = 0; i < kKeys; ++i)
      keys.push_back((uint64_t{9} << 40) + r * kKeys + i);
    ASSERT_TRUE(table->ApplyKeys(kPushRounds + 1, keys, grads).ok());
  }
  EXPECT_EQ(table->counters().rows, 64u);
}

// Large pushes and pulls, split over 4 threads, against the same on one:
// Adam's update depends on the optimizer step, which one push takes once
// however many threads apply it; every row must come out bit for bit.
TEST(ExactTableConcurrencyTest, SplitCallsEqualOneThreadsResults) {
  proto::TableSpec spec = Spec();
  spec.set_evict_after_steps(0);
  spec.mutable_optimizer()->set_name("adam");
  spec.mutable_optimizer()->set_learning_rate(0.01f);
  ExactTable::Options one, four;
  one.threads = 1;
  four.threads = 4;
  auto serial = ExactTable::Create(spec, one).value();
  auto split = ExactTable::Create(spec, four).value();
  const size_t n = 3 * ExactTable::kParallelKeys;
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys(n);
  std::vector<float> grads(2 * n);
  for (int push = 0; push < 6; ++push) {
    for (auto& k : keys) k = rng() % (2 * n);  // repeats: rows updated again
    for (auto& g : grads) g = static_cast<float>(rng() % 200) / 100 - 1;
    ASSERT_TRUE(serial->ApplyKeys(push + 1, keys, grads).ok());
    ASSERT_TRUE(split->ApplyKeys(push + 1, keys, grads).ok());
  }
  std::vector<uint64_t> all(2 * n);
  for (uint64_t k = 0; k < all.size(); ++k) all[k] = k;
  std::vector<float> a(2 * all.size()), b(2 * all.size(), -1);
  std::unique_ptr<bool[]> pa(new bool[all.size()]), pb(new bool[all.size()]);
  ASSERT_TRUE(serial->ReadKeys(all, a, {pa.get(), all.size()}).ok());
  ASSERT_TRUE(split->ReadKeys(all, b, {pb.get(), all.size()}).ok());
  size_t rows = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(pa[i], pb[i]) << "key " << i;
    rows += pa[i];
    ASSERT_EQ(a[2 * i], b[2 * i]) << "key " << i;
    ASSERT_EQ(a[2 * i + 1], b[2 * i + 1]) << "key " << i;
  }
  EXPECT_GT(rows, n / 2);
  EXPECT_EQ(serial->counters().rows, split->counters().rows);
}

// Two pushers of large batches (each split over the table's threads, or
// on its own thread when the other holds them) and a reader of large
// batches at once: rows read are whole, and each key ends with exactly
// its pushes.
TEST(ExactTableConcurrencyTest, SplitCallsLoseNoUpdate) {
  proto::TableSpec spec = Spec();
  spec.set_evict_after_steps(0);
  ExactTable::Options options;
  options.threads = 4;
  auto table = ExactTable::Create(spec, options).value();
  constexpr uint64_t kKeys = 4 * ExactTable::kParallelKeys;
  constexpr size_t kBig = 2 * ExactTable::kParallelKeys;
  std::vector<uint32_t> pushes[2] = {std::vector<uint32_t>(kKeys),
                                     std::vector<uint32_t>(kKeys)};
  std::atomic<bool> stop{false};
  std::atomic<int> problems{0};
  std::vector<std::thread> pushers;
  for (int w = 0; w < 2; ++w) {
    pushers.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      std::vector<uint64_t> keys(kBig);
      std::vector<float> grads;
      for (size_t i = 0; i < kBig; ++i) grads.insert(grads.end(), {1, 2});
      for (int r = 0; r < 8; ++r) {
        for (auto& k : keys) {
          k = rng() % kKeys;
          ++pushes[w][k];
        }
        if (!table->ApplyKeys(1, keys, grads).ok()) ++problems;
      }
    });
  }
  std::thread reader([&] {
    std::vector<uint64_t> keys(kBig);
    for (size_t i = 0; i < kBig; ++i) keys[i] = i;
    std::vector<float> out(2 * kBig);
    std::unique_ptr<bool[]> present(new bool[kBig]);
    while (!stop.load()) {
      if (!table->ReadKeys(keys, out, {present.get(), kBig}).ok()) {
        ++problems;
        continue;
      }
      const std::string bad = CheckRows(
          out, std::vector<bool>(present.get(), present.get() + kBig));
      if (!bad.empty()) {
        ADD_FAILURE() << "a reader saw " << bad;
        ++problems;
      }
    }
  });
  for (auto& t : pushers) t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(problems.load(), 0);
  std::vector<uint64_t> all(kKeys);
  for (uint64_t k = 0; k < kKeys; ++k) all[k] = k;
  std::vector<float> out(2 * kKeys);
  std::unique_ptr<bool[]> present(new bool[kKeys]);
  ASSERT_TRUE(table->ReadKeys(all, out, {present.get(), kKeys}).ok());
  for (uint64_t k = 0; k < kKeys; ++k) {
    const uint32_t n = pushes[0][k] + pushes[1][k];
    ASSERT_EQ(present[k], n > 0) << "key " << k;
    ASSERT_EQ(out[2 * k], static_cast<float>(n)) << "key " << k;
    ASSERT_EQ(out[2 * k + 1], 2.0f * n) << "key " << k;
  }
}

TEST(ExactTableConcurrencyTest, IndexesGrowIntoSparesWhileReadersRead) {
  proto::TableSpec spec = Spec();
  spec.set_evict_after_steps(0);
  ExactTable::Options options;
  options.threads = 1;
  options.index_spares = {{16, SIZE_MAX}};  // nearly every growth
  auto table = ExactTable::Create(spec, options).value();
  constexpr int kPushers = 3;
  constexpr uint64_t kKeys = 6000;  // per pusher: ~280 a partition in all
  constexpr size_t kSmall = 50;     // few new keys a call: growths one by one
  std::atomic<uint64_t> written[kPushers] = {};
  std::atomic<bool> stop{false};
  std::atomic<int> problems{0};
  std::vector<std::thread> pushers;
  for (int w = 0; w < kPushers; ++w) {
    pushers.emplace_back([&, w] {
      std::vector<float> grads;
      for (size_t i = 0; i < kSmall; ++i) grads.insert(grads.end(), {1, 2});
      std::vector<uint64_t> keys(kSmall);
      for (uint64_t from = 0; from < kKeys; from += kSmall) {
        for (int twice = 0; twice < 2; ++twice) {
          for (size_t i = 0; i < kSmall; ++i) {
            keys[i] = uint64_t(w) << 32 | (from + i);
          }
          if (!table->ApplyKeys(1, keys, grads).ok()) ++problems;
        }
        written[w] = from + kSmall;
      }
    });
  }
  std::thread reader([&] {
    std::vector<uint64_t> keys;
    std::vector<float> out;
    while (!stop.load()) {
      keys.clear();
      for (int w = 0; w < kPushers; ++w) {
        const uint64_t n = written[w].load();
        for (uint64_t k = 0; k < n; k += 7)
          keys.push_back(uint64_t(w) << 32 | k);
      }
      out.resize(2 * keys.size());
      std::unique_ptr<bool[]> present(new bool[keys.size()]);
      if (!table->ReadKeys(keys, out, {present.get(), keys.size()}).ok()) {
        ++problems;
        continue;
      }
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!present[i] || out[2 * i] != 2 || out[2 * i + 1] != 4) {
          ADD_FAILURE() << "key " << keys[i] << " read as present "
                        << present[i] << " {" << out[2 * i] << ", "
                        << out[2 * i + 1] << "}, pushed twice";
          ++problems;
          break;
        }
      }
    }
  });
  for (auto& t : pushers) t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(problems.load(), 0);
  EXPECT_EQ(table->counters().rows, kPushers * kKeys);
  std::vector<uint64_t> all;
  for (int w = 0; w < kPushers; ++w) {
    for (uint64_t k = 0; k < kKeys; ++k) all.push_back(uint64_t(w) << 32 | k);
  }
  std::vector<float> out(2 * all.size());
  std::unique_ptr<bool[]> present(new bool[all.size()]);
  ASSERT_TRUE(table->ReadKeys(all, out, {present.get(), all.size()}).ok());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(present[i]) << "key " << all[i];
    ASSERT_EQ(out[2 * i], 2.0f) << "key " << all[i];
    ASSERT_EQ(out[2 * i + 1], 4.0f) << "key " << all[i];
  }
}

}  // namespace
}  // namespace ps::table
