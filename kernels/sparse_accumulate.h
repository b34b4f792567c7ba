// Sparse accumulation: folds decoded sparse gradients (a sorted or unsorted
// list of row indices, each with `dim` float values) into a dense table of
// `num_rows` x `dim` floats, table[row * dim + j] += values[i * dim + j].
//
// Two modes:
//   kAtomic    several threads (one per sender or apply thread) may add into
//              the same table at the same time; every float add is atomic (a
//              locked read-modify-write, or one of a small batch of plain adds
//              inside a hardware transaction where the CPU has Intel RTM), so
//              no update is lost. The sum is exact up to the order in which
//              float additions of different threads happen to round.
//
// On one thread both modes add in the order given, so the table ends up bit
// for bit as after the plain loop table[row] += value in that order.
//   kExclusive the caller owns the table (no other thread reads or writes the
//              touched rows during the call): plain loads and stores, SIMD.
//
// Bounds: indices normally come from a decoder that has already checked them
// against the table, but the accumulator does not trust that. It checks every
// index against `num_rows` before writing anything, so a bad list returns
// OutOfRange and leaves the table untouched (no partial update). The check is
// one vectorized max over the indices (AVX2 where the CPU has it), small
// next to the scattered writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"

namespace ps::kernels {

enum class AccumulateMode {
  kAtomic,     // safe against concurrent accumulation into the same table
  kExclusive,  // single owner: faster, not safe against concurrent writers
};

// A dense table of num_rows rows of `dim` floats, row-major, owned elsewhere.
struct DenseRows {
  float* data = nullptr;
  uint64_t num_rows = 0;
  uint32_t dim = 0;
};

// Adds values[i * dim .. (i + 1) * dim) into row rows[i] of `table` for every
// i. `values` holds rows.size() * table.dim floats (InvalidArgument
// otherwise). Repeated indices are allowed and add up. Returns OutOfRange,
// naming the first bad index, if any index is >= table.num_rows; the table is
// then unchanged.
Status AccumulateRows(std::span<const uint32_t> rows,
                      std::span<const float> values, DenseRows table,
                      AccumulateMode mode);

}  // namespace ps::kernels
