// StepFold: the pushes of one bsp step, from several workers, made one
// optimizer step on their summed gradient, which is the update --local makes
// for the same step.
//
// Why: a stateful optimizer's step is not linear in the gradient. Adam's
// step hardly depends on the gradient's size, so the N workers' pushes of a
// step, applied one by one, move a row all of them touched N times as far
// as one step on their sum; dividing the rate by N instead leaves a row only
// one worker touched (most rows of a sparse table) at 1/N of its step.
// Adagrad's and FTRL's accumulators see the sum of the squares instead of
// the square of the sum.
//
// How: no push says it is the last of its step, and none needs to. The
// first push of a step that touches a row saves the row as it was before
// the step (values and optimizer state) and its gradient. A later push of
// the same step to that row puts the saved row back and adds its gradient
// to the saved sum; the optimizer then runs on the sum. After the step's
// last push every row it touched holds one optimizer step on the summed
// gradient. A push of another step forgets the saved rows.
//
// This needs bsp: every push of a step applied before any push of the next
// one is sent, and no pull in between (a pull mid-step could see a row with
// only some workers' part of the step).
//
// Memory: (state arrays + 2) x dim floats for each row the current step has
// touched, reused from step to step.
//
// Thread-safety: none; its ParamTable calls it under the optimizer mutex.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kernels/optimizers.h"

namespace ps::table {

class StepFold {
 public:
  StepFold(uint32_t dim, int state_arrays)
      : dim_(dim), state_arrays_(state_arrays) {}

  // Before the optimizer applies `grads` (rows.size() x dim) of a push of
  // training step `step` to `rows` of `table`: rows this step touched before
  // get their saved values and state back, and their gradient replaced by
  // the step's sum so far. *new_step says whether this push starts a step
  // (the caller counts an optimizer step then). kOutOfRange for a row >=
  // table.num_rows (nothing changed then).
  Status Fold(uint64_t step, const kernels::OptimizerTable& table,
              std::span<const uint32_t> rows, std::span<float> grads,
              bool* new_step);

  // Forgets the saved rows (the table's rows were replaced: a restore).
  void Forget();

  // Rows the current step has touched.
  size_t rows_in_step() const { return entry_of_row_.size(); }

 private:
  const uint32_t dim_;
  const int state_arrays_;
  bool in_step_ = false;
  uint64_t step_ = 0;
  std::unordered_map<uint32_t, uint32_t> entry_of_row_;
  // Entry e: values, state 0 .. state_arrays_ - 1, gradient sum; dim floats
  // each, at e x (state_arrays_ + 2) x dim.
  std::vector<float> entries_;
};

}  // namespace ps::table
