// DeviceParamTable's Table side that needs no CUDA of its own (built with
// the CUDA table and with the stub alike): applies of host-decoded rows,
// and checkpoints as host copies of the rows.
#include <new>
#include <string>

#include "table/device_param_table.h"

namespace ps::table {

Status DeviceParamTable::ApplyRows(uint64_t /*step*/,
                                   std::span<const uint32_t> rows,
                                   std::span<float> grads,
                                   kernels::AccumulateMode /*mode*/) {
  return Apply(rows, grads);
}

std::string DeviceParamTable::Placement() const {
  return Table::Placement() + " on cuda:" + std::to_string(device_);
}

Status DeviceParamTable::Snapshot(TableSnapshot* out) const {
  out->first_row = first_row_;
  out->rows = num_rows_;
  out->state_arrays = optimizer_.arrays();
  return CopyTo(&out->values, out->state, &out->optimizer_steps)
      .WithContext("copying table '" + spec().name() +
                   "' off cuda:" + std::to_string(device_));
}

Status DeviceParamTable::PrepareRestore(TableTarget* target) {
  const uint64_t floats = num_rows_ * dim_;
  target->state_arrays = optimizer_.arrays();
  target->first_row = first_row_;
  target->rows = num_rows_;
  try {
    target->staged_values.assign(floats, 0.0f);
    for (int k = 0; k < optimizer_.arrays(); ++k) {
      target->staged_state[k].assign(floats, 0.0f);
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("cannot allocate host memory to restore table '" +
                             spec().name() + "'");
  }
  target->values = target->staged_values.data();
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    target->state[k] = target->staged_state[k].data();
  }
  return Status::OK();
}

Status DeviceParamTable::FinishRestore(TableTarget* target) {
  return RestoreFrom(target->staged_values, target->staged_state,
                     target->optimizer_steps)
      .WithContext("loading table '" + spec().name() +
                   "' onto cuda:" + std::to_string(device_));
}

}  // namespace ps::table
