#include "worker/client/dense_accumulator.h"

#include <bit>
#include <cstring>

namespace ps::worker {

void DenseAccumulator::Reset(uint64_t rows, uint32_t dim) {
  if (rows == rows_ && dim == dim_) return;
  rows_ = rows;
  dim_ = dim;
  sums_ = HugeArray<float>();  // fresh mappings are zero-filled
  sums_.Resize(rows * dim);
  touched_ = HugeArray<uint64_t>();
  touched_.Resize((rows + 63) / 64);
}

bool DenseAccumulator::Drain(size_t* cursor, size_t max_rows,
                             std::vector<uint32_t>* rows,
                             std::vector<float>* values) {
  size_t taken = 0;
  size_t w = *cursor;
  const size_t words = touched_.size();
  for (; w < words && taken < max_rows; ++w) {
    uint64_t bits = touched_[w];
    if (bits == 0) continue;
    touched_[w] = 0;
    while (bits != 0) {
      const uint32_t row =
          static_cast<uint32_t>(w * 64 + std::countr_zero(bits));
      bits &= bits - 1;
      rows->push_back(row);
      float* src = sums_.data() + size_t{row} * dim_;
      if (dim_ == 1) {
        values->push_back(*src);
        *src = 0.0f;
      } else {
        values->insert(values->end(), src, src + dim_);
        std::memset(src, 0, sizeof(float) * dim_);
      }
      ++taken;
    }
  }
  *cursor = w;
  return w < words;
}

void DenseAccumulator::ClearTouched() {
  for (size_t w = 0; w < touched_.size(); ++w) {
    uint64_t bits = touched_[w];
    if (bits == 0) continue;
    touched_[w] = 0;
    while (bits != 0) {
      const size_t row = w * 64 + std::countr_zero(bits);
      bits &= bits - 1;
      std::memset(sums_.data() + row * dim_, 0, sizeof(float) * dim_);
    }
  }
}

size_t DenseAccumulator::CountTouched() const {
  size_t n = 0;
  for (size_t w = 0; w < touched_.size(); ++w) n += std::popcount(touched_[w]);
  return n;
}

}  // namespace ps::worker
