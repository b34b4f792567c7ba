#include "table/optimizer_state.h"

#include <algorithm>

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
  for (int k = 0; k < arrays_; ++k) {
    if (!arrays_data_[k].Reserve(floats)) {
      return ResourceExhausted("cannot allocate optimizer state");
    }
  }
  return Status::OK();
}

Status OptimizerState::Resize(uint64_t floats) {
  // Room first, for every array, so that a failure changes no size; the
  // room grows geometrically (GrowingArray::Resize), so a table that grows
  // a row at a time (ExactTable) grows its arrays a bounded number of times.
  for (int k = 0; k < arrays_; ++k) {
    GrowingArray<float>& array = arrays_data_[k];
    if (floats > array.capacity() &&
        !array.Reserve(std::max<uint64_t>(floats, 2 * array.capacity()))) {
      return ResourceExhausted("cannot allocate optimizer state");
    }
  }
  for (int k = 0; k < arrays_; ++k) {
    (void)arrays_data_[k].Resize(floats, initial_value(k));  // has room
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
