// DenseAccumulator: sums a push's gradients per row of one table shard in a
// dense rows x dim buffer, with a bitmap of the rows touched: the dense
// gradient a sparsifying table's error feedback takes in. Adding is one
// random write per key; ClearTouched zeroes only the rows added to, so the
// buffer is all zeros between pushes and costs nothing to reuse.
//
// Not thread-safe: its PushPipeline holds a lock while it adds and drains
// (threads that add at once must touch disjoint 64-row blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "client/huge_array.h"

namespace ps::worker {

class DenseAccumulator {
 public:
  // Sizes the buffer for `rows` x `dim` (allocated on first use, zeroed).
  void Reset(uint64_t rows, uint32_t dim);
  uint64_t rows() const { return rows_; }
  uint32_t dim() const { return dim_; }

  // Adds `values` (dim floats) to `row`.
  void Add(uint32_t row, const float* values) {
    float* dst = sums_.data() + size_t{row} * dim_;
    for (uint32_t j = 0; j < dim_; ++j) dst[j] += values[j];
    touched_[row >> 6] |= uint64_t{1} << (row & 63);
  }
  // Starts loading what Add(row) touches (hot loops prefetch a block of
  // rows ahead: the sums are far bigger than the caches).
  void Prefetch(uint32_t row) const {
    __builtin_prefetch(sums_.data() + size_t{row} * dim_, 1);
    __builtin_prefetch(touched_.data() + (row >> 6), 1);
  }
  // dim == 1 fast path.
  void Add1(uint32_t row, float value) {
    sums_[row] += value;
    touched_[row >> 6] |= uint64_t{1} << (row & 63);
  }

  // The whole buffer as a dense gradient (for error feedback), and the
  // cleanup after it was consumed: zero the touched rows, clear the bitmap.
  std::span<const float> dense() const {
    return {sums_.data(), size_t{rows_} * dim_};
  }
  void ClearTouched();
  // How many rows were touched since the last ClearTouched.
  size_t CountTouched() const;

 private:
  uint64_t rows_ = 0;
  uint32_t dim_ = 0;
  HugeArray<float> sums_;
  HugeArray<uint64_t> touched_;
};

}  // namespace ps::worker
