#include "client/dense_accumulator.h"

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
