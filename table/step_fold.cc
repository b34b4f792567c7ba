#include "table/step_fold.h"

#include <algorithm>
#include <string>

namespace ps::table {

Status StepFold::Fold(uint64_t step, const kernels::OptimizerTable& table,
                      std::span<const uint32_t> rows, std::span<float> grads,
                      bool* new_step) {
  for (uint32_t row : rows) {
    if (row >= table.num_rows) {
      return OutOfRange("row " + std::to_string(row) + " of " +
                        std::to_string(table.num_rows));
    }
  }
  *new_step = !in_step_ || step != step_;
  if (*new_step) Forget();
  in_step_ = true;
  step_ = step;
  const size_t stride = (state_arrays_ + 2) * size_t{dim_};
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t at = size_t{rows[i]} * dim_;
    float* grad = grads.data() + i * dim_;
    auto [it, first] = entry_of_row_.try_emplace(
        rows[i], static_cast<uint32_t>(entry_of_row_.size()));
    if (first) entries_.resize(entries_.size() + stride);
    float* values = entries_.data() + it->second * stride;
    float* sum = values + (state_arrays_ + 1) * size_t{dim_};
    if (first) {
      std::copy_n(table.params + at, dim_, values);
      for (int k = 0; k < state_arrays_; ++k) {
        std::copy_n(table.state[k] + at, dim_, values + (k + 1) * dim_);
      }
      std::copy_n(grad, dim_, sum);
      continue;
    }
    std::copy_n(values, dim_, table.params + at);
    for (int k = 0; k < state_arrays_; ++k) {
      std::copy_n(values + (k + 1) * dim_, dim_, table.state[k] + at);
    }
    for (uint32_t d = 0; d < dim_; ++d) sum[d] += grad[d];
    std::copy_n(sum, dim_, grad);
  }
  return Status::OK();
}

void StepFold::Forget() {
  in_step_ = false;
  entry_of_row_.clear();
  entries_.clear();
}

}  // namespace ps::table
