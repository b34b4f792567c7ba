// OptimizerState: the part of a table that updates its rows, the same for
// every kind of table (table/table.h):
//
//   - the apply rule its spec gives:
//       "sum"  rows += g          plain adds (add_scale 1)
//       "sgd"  rows += -lr * g    the same adds (add_scale -lr)
//       others (momentum, adagrad, adam, ftrl): a stateful optimizer that
//              updates rows and state together;
//   - the optimizer's state arrays, one float per parameter each, in host
//     memory, sized by the table (Resize) as it has rows, every entry
//     starting at the optimizer's initial value (Adagrad's accumulator at
//     initial_accumulator, the rest at 0);
//   - the count of optimizer steps taken (Adam's bias correction reads it).
//
// A table on a device keeps its state arrays in device memory: it uses the
// rule, the array count, the initial values and the step count here, and
// leaves the host arrays empty.
//
// Not thread-safe: the table that holds it guards it (its optimizer mutex).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "base/growing_array.h"
#include "base/status.h"
#include "kernels/optimizers.h"
#include "protocol/ps.pb.h"

namespace ps::table {

// The value optimizer state array k starts at: 0, except Adagrad's
// accumulator (state 0), which starts at initial_accumulator.
float InitialStateValue(const kernels::OptimizerConfig& optimizer, int k);

class OptimizerState {
 public:
  // The rule of `spec` (expected valid: protocol::ValidateTableSpec passed).
  explicit OptimizerState(const proto::TableSpec& spec);

  // The stateful optimizer; none for "sum" and "sgd".
  const std::optional<kernels::OptimizerConfig>& optimizer() const {
    return optimizer_;
  }
  // What "sum" and "sgd" scale a gradient by before adding it; 0 for a
  // stateful optimizer.
  float add_scale() const { return add_scale_; }
  // State arrays per parameter (0 .. kernels::kMaxOptimizerStates).
  int arrays() const { return arrays_; }
  float initial_value(int k) const {
    return optimizer_ ? InitialStateValue(*optimizer_, k) : 0.0f;
  }

  // Host arrays of `floats` floats each, new entries at their initial value
  // (grown geometrically). kResourceExhausted when memory cannot be had
  // (the sizes unchanged then).
  Status Resize(uint64_t floats);
  // Room for `floats` entries per array without growing (a Resize up to it
  // then copies nothing); kResourceExhausted without memory.
  Status Reserve(uint64_t floats);
  float* array(int k) { return arrays_data_[k].data(); }
  const float* array(int k) const { return arrays_data_[k].data(); }
  // Entries [offset, offset + floats) of every array back to their initial
  // values (a reused row).
  void ResetEntries(uint64_t offset, uint64_t floats);
  // Bytes of the host arrays.
  uint64_t bytes() const;

  // The stateful optimizer's view of `params` (num_rows x dim floats) and
  // the host arrays, for the kernels.
  kernels::OptimizerTable View(float* params, uint64_t num_rows, uint32_t dim);

  uint64_t steps() const { return steps_; }
  void set_steps(uint64_t steps) { steps_ = steps; }
  // Counts one more optimizer step and returns the new count.
  uint64_t NextStep() { return ++steps_; }

 private:
  std::optional<kernels::OptimizerConfig> optimizer_;
  float add_scale_ = 0.0f;
  int arrays_ = 0;
  // Grown in place (base/growing_array.h): an exact table grows them a row
  // at a time.
  GrowingArray<float> arrays_data_[kernels::kMaxOptimizerStates];
  uint64_t steps_ = 0;
};

}  // namespace ps::table
