#include "table/optimizer_state.h"

#include <algorithm>
#include <new>

#include "protocol/table_config.h"

namespace ps::table {

float InitialStateValue(const kernels::OptimizerConfig& optimizer, int k) {
  if (k != 0) return 0.0f;
  if (auto* a = std::get_if<kernels::AdagradConfig>(&optimizer)) {
    return a->initial_accumulator;
  }
  return 0.0f;
}

OptimizerState::OptimizerState(const proto::TableSpec& spec) {
  auto opt = protocol::OptimizerFromSpec(spec.optimizer());
  if (!opt.ok()) {
    add_scale_ = 1.0f;  // "sum" (ValidateTableSpec refused the rest)
  } else if (auto* sgd = std::get_if<kernels::SgdConfig>(&*opt)) {
    add_scale_ = -sgd->learning_rate;
  } else {
    optimizer_ = *opt;
    arrays_ = kernels::StateFloatsPerParameter(*optimizer_);
  }
}

Status OptimizerState::Reserve(uint64_t floats) {
  try {
    for (int k = 0; k < arrays_; ++k) arrays_data_[k].reserve(floats);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("cannot allocate optimizer state");
  }
  return Status::OK();
}

Status OptimizerState::Resize(uint64_t floats) {
  try {
    for (int k = 0; k < arrays_; ++k) {
      std::vector<float>& array = arrays_data_[k];
      // Geometric growth: a table that grows a row at a time (ExactTable)
      // copies each entry a bounded number of times.
      if (floats > array.capacity()) {
        array.reserve(std::max<uint64_t>(floats, 2 * array.capacity()));
      }
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("cannot allocate optimizer state");
  }
  for (int k = 0; k < arrays_; ++k) {
    arrays_data_[k].resize(floats, initial_value(k));
  }
  return Status::OK();
}

void OptimizerState::ResetEntries(uint64_t offset, uint64_t floats) {
  for (int k = 0; k < arrays_; ++k) {
    std::fill_n(arrays_data_[k].data() + offset, floats, initial_value(k));
  }
}

uint64_t OptimizerState::bytes() const {
  uint64_t bytes = 0;
  for (int k = 0; k < arrays_; ++k) {
    bytes += arrays_data_[k].size() * sizeof(float);
  }
  return bytes;
}

kernels::OptimizerTable OptimizerState::View(float* params, uint64_t num_rows,
                                             uint32_t dim) {
  kernels::OptimizerTable t;
  t.params = params;
  for (int k = 0; k < kernels::kMaxOptimizerStates; ++k) {
    t.state[k] = k < arrays_ ? arrays_data_[k].data() : nullptr;
  }
  t.num_rows = num_rows;
  t.dim = dim;
  return t;
}

}  // namespace ps::table
