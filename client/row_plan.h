// RowPlan: which rows of one shard a call touches, deduplicated and sorted,
// and which key goes with which row. Built from (local row, key index) pairs
// packed as (row << 32 | index) and sorted by row with a radix sort (no
// comparison sort over millions of keys); a pull then reads each unique row
// once and a push sums the duplicates of each row before sending it.
//
// Pure functions over the caller's buffers: thread-safe for distinct buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/endpoint.h"

namespace ps::worker {

inline uint64_t PackRowIndex(uint32_t row, uint32_t index) {
  return (uint64_t{row} << 32) | index;
}
inline uint32_t PackedRow(uint64_t packed) {
  return static_cast<uint32_t>(packed >> 32);
}
inline uint32_t PackedIndex(uint64_t packed) {
  return static_cast<uint32_t>(packed);
}

// Sorts packed pairs by row (stable: equal rows keep their index order),
// looking only at the bits below `row_limit` (every row < row_limit).
// `scratch` is reused between calls.
void SortByRow(std::vector<uint64_t>* pairs, uint64_t row_limit,
               std::vector<uint64_t>* scratch);

// The strictly increasing distinct rows of row-sorted pairs.
void UniqueRows(std::span<const uint64_t> sorted_pairs,
                std::vector<uint32_t>* rows);

// How a pull reads a shard's unique rows: a list of segments (each a run of
// rows read with one ReadV entry, holes included) laid out back to back in a
// local buffer, and where each unique row landed in it.
struct ReadPlan {
  struct Span {
    uint32_t first_row;   // local row of the segment's start
    uint32_t rows;        // rows it covers (including holes)
    uint64_t buffer_row;  // its first row's position in the local buffer
  };
  std::vector<Span> spans;
  uint64_t buffer_rows = 0;  // rows the local buffer needs
};

// Plans the reads of `rows` (strictly increasing). Adjacent rows share a
// segment; a hole of at most `max_hole_rows` rows is read along rather than
// starting a new segment (a segment costs more than a few bytes); and when
// the rows fill more than 1/`dense_fraction_inverse` of their span, the
// whole span is one segment (one Get beats many small pieces).
void PlanReads(std::span<const uint32_t> rows, uint32_t max_hole_rows,
               uint32_t dense_fraction_inverse, ReadPlan* plan);

// The plan's segments for ReadV: row r of span k goes to
// buffer + (buffer_row + r - first_row) * row_bytes, from remote offset
// r * row_bytes.
void PlanSegments(const ReadPlan& plan, void* buffer, size_t row_bytes,
                  std::vector<xfer::Segment>* segments);

}  // namespace ps::worker
