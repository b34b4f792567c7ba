// Deduplication and read planning of the pull and push paths.
#include "client/row_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace ps::worker {
namespace {

TEST(RowPlanTest, SortByRowIsStableAndMatchesAComparisonSort) {
  std::mt19937_64 rng(1);
  // Each way of sorting: comparison (< 32 pairs), 8-bit digits (< 2048),
  // 11-bit digits; at and around the borders.
  for (size_t n :
       {0u, 1u, 5u, 31u, 32u, 33u, 1000u, 2047u, 2048u, 5000u, 200000u}) {
    for (uint64_t limit : {1ull, 100ull, 70000ull, 1ull << 31}) {
      std::vector<uint64_t> pairs(n), scratch;
      for (size_t i = 0; i < n; ++i) {
        pairs[i] = PackRowIndex(static_cast<uint32_t>(rng() % limit),
                                static_cast<uint32_t>(i));
      }
      std::vector<uint64_t> want = pairs;
      std::stable_sort(want.begin(), want.end(), [](uint64_t a, uint64_t b) {
        return PackedRow(a) < PackedRow(b);
      });
      SortByRow(&pairs, limit, &scratch);
      ASSERT_EQ(pairs, want) << "n " << n << " limit " << limit;
    }
  }
}

TEST(RowPlanTest, UniqueRowsDropsDuplicates) {
  std::vector<uint64_t> pairs = {PackRowIndex(1, 4), PackRowIndex(1, 7),
                                 PackRowIndex(3, 0), PackRowIndex(9, 2),
                                 PackRowIndex(9, 3)};
  std::vector<uint32_t> rows;
  UniqueRows(pairs, &rows);
  EXPECT_EQ(rows, (std::vector<uint32_t>{1, 3, 9}));
}

TEST(RowPlanTest, AdjacentRowsAndSmallHolesShareASegment) {
  // Rows 10,11,12 adjacent; 14 after a hole of 1; 100 far away.
  std::vector<uint32_t> rows = {10, 11, 12, 14, 100};
  ReadPlan plan;
  PlanReads(rows, /*max_hole_rows=*/1, /*dense_fraction_inverse=*/0, &plan);
  ASSERT_EQ(plan.spans.size(), 2u);
  EXPECT_EQ(plan.spans[0].first_row, 10u);
  EXPECT_EQ(plan.spans[0].rows, 5u);  // 10..14, hole 13 read along
  EXPECT_EQ(plan.spans[0].buffer_row, 0u);
  EXPECT_EQ(plan.spans[1].first_row, 100u);
  EXPECT_EQ(plan.spans[1].rows, 1u);
  EXPECT_EQ(plan.spans[1].buffer_row, 5u);
  EXPECT_EQ(plan.buffer_rows, 6u);

  PlanReads(rows, /*max_hole_rows=*/0, 0, &plan);
  EXPECT_EQ(plan.spans.size(), 3u);
  EXPECT_EQ(plan.buffer_rows, 5u);
}

TEST(RowPlanTest, DenseRowsAreReadAsOneSpan) {
  // 20 rows in a span of 100: more than 1/8 -> one segment of the span.
  std::vector<uint32_t> rows;
  for (uint32_t r = 0; r < 100; r += 5) rows.push_back(r + 50);
  ReadPlan plan;
  PlanReads(rows, 0, 8, &plan);
  ASSERT_EQ(plan.spans.size(), 1u);
  EXPECT_EQ(plan.spans[0].first_row, 50u);
  EXPECT_EQ(plan.spans[0].rows, 96u);
  // 10 rows in a span of 1000: sparse -> one segment per row.
  rows.clear();
  for (uint32_t r = 0; r < 1000; r += 100) rows.push_back(r);
  PlanReads(rows, 0, 8, &plan);
  EXPECT_EQ(plan.spans.size(), 10u);
}

TEST(RowPlanTest, SegmentsPointIntoTheBuffer) {
  std::vector<uint32_t> rows = {2, 3, 7};
  ReadPlan plan;
  PlanReads(rows, 0, 0, &plan);
  std::vector<float> buffer(plan.buffer_rows * 4);
  std::vector<xfer::Segment> segs;
  PlanSegments(plan, buffer.data(), 16, &segs);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].local, buffer.data());
  EXPECT_EQ(segs[0].remote_offset, 32u);
  EXPECT_EQ(segs[0].length, 32u);
  EXPECT_EQ(segs[1].local, buffer.data() + 8);
  EXPECT_EQ(segs[1].remote_offset, 112u);
  EXPECT_EQ(segs[1].length, 16u);
}

}  // namespace
}  // namespace ps::worker
