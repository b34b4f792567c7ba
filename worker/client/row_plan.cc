#include "worker/client/row_plan.h"

#include <algorithm>
#include <bit>

namespace ps::worker {

void SortByRow(std::vector<uint64_t>* pairs, uint64_t row_limit,
               std::vector<uint64_t>* scratch) {
  const size_t n = pairs->size();
  if (n < 2) return;
  if (n < 1024) {
    std::stable_sort(pairs->begin(), pairs->end(), [](uint64_t a, uint64_t b) {
      return (a >> 32) < (b >> 32);
    });
    return;
  }
  // LSD radix sort on the row bits, 11 bits per pass.
  const int row_bits = row_limit <= 1 ? 1 : std::bit_width(row_limit - 1);
  constexpr int kDigitBits = 11;
  constexpr size_t kBuckets = size_t{1} << kDigitBits;
  scratch->resize(n);
  uint64_t* src = pairs->data();
  uint64_t* dst = scratch->data();
  std::vector<size_t> count(kBuckets);
  for (int shift = 32; shift < 32 + row_bits; shift += kDigitBits) {
    std::fill(count.begin(), count.end(), 0);
    for (size_t i = 0; i < n; ++i) ++count[(src[i] >> shift) & (kBuckets - 1)];
    size_t sum = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      size_t c = count[b];
      count[b] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; ++i) {
      dst[count[(src[i] >> shift) & (kBuckets - 1)]++] = src[i];
    }
    std::swap(src, dst);
  }
  if (src != pairs->data()) pairs->swap(*scratch);
}

void UniqueRows(std::span<const uint64_t> sorted_pairs,
                std::vector<uint32_t>* rows) {
  rows->clear();
  for (uint64_t p : sorted_pairs) {
    uint32_t r = PackedRow(p);
    if (rows->empty() || rows->back() != r) rows->push_back(r);
  }
}

void PlanReads(std::span<const uint32_t> rows, uint32_t max_hole_rows,
               uint32_t dense_fraction_inverse, ReadPlan* plan) {
  plan->spans.clear();
  plan->buffer_rows = 0;
  if (rows.empty()) return;
  const uint64_t span = uint64_t{rows.back()} - rows.front() + 1;
  if (dense_fraction_inverse > 0 &&
      rows.size() * uint64_t{dense_fraction_inverse} > span) {
    plan->spans.push_back({rows.front(), static_cast<uint32_t>(span), 0});
    plan->buffer_rows = span;
    return;
  }
  ReadPlan::Span cur{rows[0], 1, 0};
  for (size_t i = 1; i < rows.size(); ++i) {
    const uint32_t end = cur.first_row + cur.rows;  // one past the span
    if (rows[i] - end <= max_hole_rows) {
      cur.rows = rows[i] - cur.first_row + 1;
    } else {
      plan->spans.push_back(cur);
      cur = {rows[i], 1, cur.buffer_row + cur.rows};
    }
  }
  plan->spans.push_back(cur);
  plan->buffer_rows = cur.buffer_row + cur.rows;
}

void PlanSegments(const ReadPlan& plan, void* buffer, size_t row_bytes,
                  std::vector<xfer::Segment>* segments) {
  segments->clear();
  auto* base = static_cast<uint8_t*>(buffer);
  for (const ReadPlan::Span& s : plan.spans) {
    segments->push_back({base + s.buffer_row * row_bytes,
                         uint64_t{s.first_row} * row_bytes,
                         size_t{s.rows} * row_bytes});
  }
}

}  // namespace ps::worker
