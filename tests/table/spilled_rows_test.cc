// RowSpill and SpilledRows (table/spilled_rows.h): rows written in runs to
// a file without a name, read back merged in key order, from several
// threads at once; and the errors of a bad order, a repeated key and a
// folder that is not there.
#include "table/spilled_rows.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "tests/temp_dir.h"

namespace ps::table {
namespace {

using ::ps::testing::TempDir;

constexpr uint32_t kDim = 16;
constexpr int kArrays = 2;

// The row of `key`: values key + i, state -key - i and 2 * key + i.
struct Row {
  float values[kDim], a[kDim], b[kDim];
  const float* state[kArrays] = {a, b};
  explicit Row(uint64_t key) {
    for (uint32_t i = 0; i < kDim; ++i) {
      values[i] = static_cast<float>(key + i);
      a[i] = -static_cast<float>(key + i);
      b[i] = static_cast<float>(2 * key + i);
    }
  }
};

// Checks every row of `rows` against Row(key) and last update 7 * key, in
// ascending key order; returns the keys.
std::vector<uint64_t> ReadBack(const SpilledRows& rows) {
  std::vector<uint64_t> keys;
  const Status s = rows.ForEach([&](uint64_t key, const float* values,
                                    const float* const* state, uint64_t last) {
    const Row want(key);
    bool same = last == 7 * key;
    for (uint32_t i = 0; i < kDim; ++i) {
      same = same && values[i] == want.values[i] && state[0][i] == want.a[i] &&
             state[1][i] == want.b[i];
    }
    EXPECT_TRUE(same) << "key " << key;
    EXPECT_TRUE(keys.empty() || key > keys.back()) << key;
    keys.push_back(key);
  });
  EXPECT_TRUE(s.ok()) << s;
  return keys;
}

TEST(SpilledRowsTest, RunsMergeInKeyOrderFromAFileWithoutAName) {
  TempDir dir;
  auto spill = RowSpill::Create(dir.path(), kDim, kArrays);
  ASSERT_TRUE(spill.ok()) << spill.status();
  // Three runs of interleaved keys, 420,000 rows (87 MB: many read
  // buffers, and past the steps in which writes are settled).
  constexpr uint64_t kRows = 420000;
  for (uint64_t run = 0; run < 3; ++run) {
    for (uint64_t key = run; key < kRows; key += 3) {
      const Row row(key);
      ASSERT_TRUE((*spill)->Append(key, row.values, row.state, 7 * key).ok());
    }
    (*spill)->EndRun();
  }
  (*spill)->EndRun();  // an empty run is dropped
  EXPECT_EQ((*spill)->rows(), kRows);
  auto rows = (*spill)->Finish();
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ((*rows)->rows(), kRows);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "the file has a name";
  std::vector<uint64_t> in_order(kRows);
  for (uint64_t k = 0; k < kRows; ++k) in_order[k] = k;
  std::vector<uint64_t> first, second;
  std::thread other([&] { second = ReadBack(**rows); });
  first = ReadBack(**rows);
  other.join();
  EXPECT_EQ(first, in_order);
  EXPECT_EQ(second, in_order);
  EXPECT_EQ((*rows)->PlaceAt(dir.path() + "/x", {}).code(),
            StatusCode::kInternal);
  EXPECT_FALSE((*rows)->linked());
}

TEST(SpilledRowsTest, AnEmptySpillReadsNothing) {
  TempDir dir;
  auto spill = RowSpill::Create(dir.path(), kDim, 0);
  ASSERT_TRUE(spill.ok()) << spill.status();
  auto rows = (*spill)->Finish();
  ASSERT_TRUE(rows.ok()) << rows.status();
  int seen = 0;
  EXPECT_TRUE((*rows)
                  ->ForEach([&](uint64_t, const float*, const float* const*,
                                uint64_t) { ++seen; })
                  .ok());
  EXPECT_EQ(seen, 0);
  EXPECT_EQ((*spill)->Finish().status().code(), StatusCode::kInternal);
}

TEST(SpilledRowsTest, KeysOutOfOrderOrRepeatedAreRefused) {
  TempDir dir;
  auto spill = RowSpill::Create(dir.path(), kDim, kArrays);
  ASSERT_TRUE(spill.ok()) << spill.status();
  const Row row(5);
  ASSERT_TRUE((*spill)->Append(5, row.values, row.state, 35).ok());
  EXPECT_EQ((*spill)->Append(5, row.values, row.state, 35).code(),
            StatusCode::kInternal);
  EXPECT_EQ((*spill)->Append(4, row.values, row.state, 35).code(),
            StatusCode::kInternal);
  (*spill)->EndRun();
  // The same key in another run: the merge refuses it.
  ASSERT_TRUE((*spill)->Append(5, row.values, row.state, 35).ok());
  auto rows = (*spill)->Finish();
  ASSERT_TRUE(rows.ok()) << rows.status();
  const Status s = (*rows)->ForEach(
      [](uint64_t, const float*, const float* const*, uint64_t) {});
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s;
  EXPECT_NE(s.message().find("repeated"), std::string::npos) << s;
}

TEST(SpilledRowsTest, AFolderThatIsNotThereIsAnIOError) {
  TempDir dir;
  auto spill = RowSpill::Create(dir.path() + "/gone", kDim, kArrays);
  EXPECT_EQ(spill.status().code(), StatusCode::kIOError);
  EXPECT_NE(spill.status().message().find(dir.path() + "/gone"),
            std::string::npos)
      << spill.status();
  EXPECT_EQ(RowSpill::Create(dir.path(), 0, kArrays).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps::table
