#include "kernels/sparse_accumulate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <latch>
#include <random>
#include <thread>
#include <vector>

namespace ps::kernels {
namespace {

struct SparseList {
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

// Random rows (repeats allowed) with `dim` values each. Integer values make
// every partial sum exact in float, so any lost or doubled add shows.
SparseList RandomList(std::mt19937& rng, size_t n, uint32_t num_rows,
                      uint32_t dim, bool integer_values) {
  SparseList list;
  std::uniform_int_distribution<uint32_t> row(0, num_rows - 1);
  std::uniform_int_distribution<int> small_int(-8, 8);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    list.rows.push_back(row(rng));
    for (uint32_t j = 0; j < dim; ++j) {
      list.values.push_back(integer_values ? static_cast<float>(small_int(rng))
                                           : real(rng));
    }
  }
  return list;
}

// The plain sum in double, and for each element the sum of |addends|, which
// bounds how much a different float rounding order can change the result.
struct Reference {
  std::vector<double> sum;
  std::vector<double> abs_sum;
  std::vector<int> count;
};

Reference ReferenceSum(const std::vector<float>& initial,
                       const std::vector<SparseList>& lists, uint32_t dim) {
  Reference ref{std::vector<double>(initial.begin(), initial.end()),
                std::vector<double>(initial.size()),
                std::vector<int>(initial.size(), 1)};
  for (size_t k = 0; k < initial.size(); ++k)
    ref.abs_sum[k] = std::fabs(initial[k]);
  for (const SparseList& list : lists) {
    for (size_t i = 0; i < list.rows.size(); ++i) {
      for (uint32_t j = 0; j < dim; ++j) {
        const size_t k = static_cast<size_t>(list.rows[i]) * dim + j;
        ref.sum[k] += list.values[i * dim + j];
        ref.abs_sum[k] += std::fabs(list.values[i * dim + j]);
        ref.count[k] += 1;
      }
    }
  }
  return ref;
}

void ExpectMatches(const std::vector<float>& table, const Reference& ref,
                   bool exact) {
  ASSERT_EQ(table.size(), ref.sum.size());
  for (size_t k = 0; k < table.size(); ++k) {
    if (exact) {
      ASSERT_EQ(table[k], static_cast<float>(ref.sum[k])) << "element " << k;
    } else {
      // Each of `count` float additions rounds by at most half an ulp of a
      // partial sum, itself bounded by abs_sum.
      const double tolerance =
          ref.count[k] * ref.abs_sum[k] * std::ldexp(1.0, -24) + 1e-30;
      ASSERT_NEAR(table[k], ref.sum[k], tolerance) << "element " << k;
    }
  }
}

class AccumulateModeTest : public ::testing::TestWithParam<AccumulateMode> {};

TEST_P(AccumulateModeTest, MatchesReferenceForManySizesAndDims) {
  std::mt19937 rng(7);
  for (uint32_t dim : {1u, 3u, 8u, 17u}) {
    for (size_t n : {0u, 1u, 7u, 13u, 1000u}) {
      for (bool integer_values : {true, false}) {
        const uint32_t num_rows = 97;
        std::vector<float> table(static_cast<size_t>(num_rows) * dim);
        for (float& x : table)
          x = std::uniform_real_distribution<float>(-1, 1)(rng);
        if (integer_values) {
          for (float& x : table) x = std::round(x * 10);
        }
        const SparseList list =
            RandomList(rng, n, num_rows, dim, integer_values);
        const Reference ref = ReferenceSum(table, {list}, dim);
        ASSERT_TRUE(AccumulateRows(list.rows, list.values,
                                   DenseRows{table.data(), num_rows, dim},
                                   GetParam())
                        .ok());
        SCOPED_TRACE("dim " + std::to_string(dim) + " n " + std::to_string(n));
        ExpectMatches(table, ref, integer_values);
      }
    }
  }
}

// On one thread both modes add in the order given, so with real-valued
// gradients and repeated rows the table is bit for bit the plain loop's,
// for lists shorter and longer than the prefetch distance (64 lines) and
// rows of one to several cache lines.
TEST_P(AccumulateModeTest, OneThreadIsBitForBitThePlainLoopInOrder) {
  std::mt19937 rng(11);
  for (uint32_t dim : {1u, 3u, 16u, 17u, 64u}) {
    for (size_t n : {1u, 2u, 63u, 64u, 65u, 300u, 5000u}) {
      const uint32_t num_rows = 2000;
      std::vector<float> table(static_cast<size_t>(num_rows) * dim);
      for (float& x : table)
        x = std::uniform_real_distribution<float>(-1, 1)(rng);
      const SparseList list =
          RandomList(rng, n, num_rows / 20, dim, /*integer_values=*/false);
      std::vector<float> want = table;
      for (size_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j < dim; ++j)
          want[size_t{list.rows[i]} * dim + j] += list.values[i * dim + j];
      ASSERT_TRUE(AccumulateRows(list.rows, list.values,
                                 DenseRows{table.data(), num_rows, dim},
                                 GetParam())
                      .ok());
      ASSERT_EQ(table, want) << "dim " << dim << " n " << n;
    }
  }
}

TEST_P(AccumulateModeTest, BadIndexIsOutOfRangeAndLeavesTableUntouched) {
  const uint32_t dim = 4;
  std::vector<float> table(10 * dim, 1.0f);
  const std::vector<float> before = table;
  const std::vector<uint32_t> rows = {0, 3, 10, 2};  // 10 is one past the end
  const std::vector<float> values(rows.size() * dim, 5.0f);
  const Status s = AccumulateRows(rows, values,
                                  DenseRows{table.data(), 10, dim}, GetParam());
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << s;
  EXPECT_NE(s.message().find("row 10"), std::string::npos) << s;
  EXPECT_EQ(table, before);

  const std::vector<uint32_t> huge = {UINT32_MAX};
  const std::vector<float> one_row(dim, 1.0f);
  EXPECT_TRUE(AccumulateRows(huge, one_row, DenseRows{table.data(), 10, dim},
                             GetParam())
                  .Is(StatusCode::kOutOfRange));
  EXPECT_EQ(table, before);
}

// The bound is found wherever the bad row sits in a long list: in each lane
// of the vector max and in its scalar tail, including rows with the top bit
// set (an unsigned max, not a signed one).
TEST_P(AccumulateModeTest, BadIndexIsFoundAnywhereInALongList) {
  const uint32_t num_rows = 1000;
  std::vector<float> table(num_rows, 1.0f);
  const std::vector<float> before = table;
  std::vector<uint32_t> rows(75);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint32_t>(i);
  const std::vector<float> values(rows.size(), 5.0f);
  for (uint32_t bad : {num_rows, 0x80000000u, UINT32_MAX}) {
    for (size_t at = 0; at < rows.size(); ++at) {
      std::vector<uint32_t> with_bad = rows;
      with_bad[at] = bad;
      const Status s = AccumulateRows(
          with_bad, values, DenseRows{table.data(), num_rows, 1}, GetParam());
      ASSERT_TRUE(s.Is(StatusCode::kOutOfRange))
          << "row " << bad << " at " << at;
      EXPECT_NE(s.message().find("index " + std::to_string(at)),
                std::string::npos)
          << s;
    }
  }
  EXPECT_EQ(table, before);
  ASSERT_TRUE(AccumulateRows(rows, values, DenseRows{table.data(), 75, 1},
                             GetParam())
                  .ok());  // the largest row is 74: in bounds
}

TEST_P(AccumulateModeTest, ValueCountMismatchIsInvalidArgument) {
  std::vector<float> table(8 * 2);
  const std::vector<uint32_t> rows = {1, 2};
  const std::vector<float> values(3);  // needs 4
  EXPECT_TRUE(
      AccumulateRows(rows, values, DenseRows{table.data(), 8, 2}, GetParam())
          .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(
      AccumulateRows(rows, values, DenseRows{table.data(), 8, 0}, GetParam())
          .Is(StatusCode::kInvalidArgument));
  // An empty list needs nothing, not even a table.
  EXPECT_TRUE(AccumulateRows({}, {}, DenseRows{}, GetParam()).ok());
}

INSTANTIATE_TEST_SUITE_P(Modes, AccumulateModeTest,
                         ::testing::Values(AccumulateMode::kAtomic,
                                           AccumulateMode::kExclusive),
                         [](const auto& info) {
                           return info.param == AccumulateMode::kAtomic
                                      ? std::string("Atomic")
                                      : std::string("Exclusive");
                         });

// Several senders add into one table at once. A small table makes them
// collide on the same floats constantly; integer values make the expected
// result exact, so one lost update fails the test.
void RunConcurrent(int threads, uint32_t dim, bool integer_values) {
  const uint32_t num_rows = 61;
  const size_t adds_per_thread = 40000 / dim;
  std::mt19937 rng(1000 + threads * 10 + dim);
  std::vector<float> table(static_cast<size_t>(num_rows) * dim, 0.0f);
  std::vector<SparseList> lists;
  for (int t = 0; t < threads; ++t) {
    lists.push_back(
        RandomList(rng, adds_per_thread, num_rows, dim, integer_values));
  }
  const Reference ref = ReferenceSum(table, lists, dim);

  std::latch start(threads);
  std::vector<Status> results(threads);
  std::vector<std::thread> senders;
  for (int t = 0; t < threads; ++t) {
    senders.emplace_back([&, t] {
      start.arrive_and_wait();
      // Many small calls, as a server applies many packets.
      const size_t chunk = 500;
      const SparseList& list = lists[t];
      for (size_t at = 0; at < list.rows.size() && results[t].ok();
           at += chunk) {
        const size_t n = std::min(chunk, list.rows.size() - at);
        results[t] = AccumulateRows(
            std::span(list.rows).subspan(at, n),
            std::span(list.values).subspan(at * dim, n * dim),
            DenseRows{table.data(), num_rows, dim}, AccumulateMode::kAtomic);
      }
    });
  }
  for (std::thread& s : senders) s.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s;
  ExpectMatches(table, ref, integer_values);
}

TEST(AccumulateConcurrentTest, OneToFourSendersEqualTheReferenceSum) {
  for (int threads = 1; threads <= 4; ++threads) {
    for (uint32_t dim : {1u, 9u}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " dim " +
                   std::to_string(dim));
      RunConcurrent(threads, dim, /*integer_values=*/true);
      RunConcurrent(threads, dim, /*integer_values=*/false);
    }
  }
}

}  // namespace
}  // namespace ps::kernels
