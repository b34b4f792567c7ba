// ParamTable: the rows of a HASHED or DENSE table held in one place (all of
// it in the local store, one shard's part of it on a server), with what
// updates them: the optimizer set up from the spec, its state arrays, its
// step count, and the apply that folds gradients into the rows.
//
// Rows: `num_rows` x dim floats, row-major, global rows [first_row,
// first_row + num_rows) of the table, started by table/initializer.h (so a
// row's values depend only on the spec and its global row). They live in
// memory the caller supplies (the server's registered region, which
// workers read one-sidedly) or that the table allocates.
//
// Apply:
//   "sum"  rows += g          plain or atomic float adds (AccumulateMode)
//   "sgd"  rows += -lr * g    the same adds, so SGD is lock-free too
//   others (momentum, adagrad, adam, ftrl): the kernels' optimizer under the
//          table's mutex, since state and parameters change together; the
//          step count grows by one per Apply.
// A table that folds the pushes of each step (FoldPushesOfEachStep: a
// server of a bsp job with several workers) makes the pushes of one step,
// from every worker, one optimizer step on their summed gradient
// (table/step_fold.h); its step count grows by one per step.
//
// ParamTable is a Table (table/table.h) whose workers read its rows
// one-sidedly (RowAccess::kRegion).
//
// Thread-safety: Apply may run on any number of threads at once when every
// caller passes kAtomic (kExclusive: the caller guarantees it is alone).
// CopyTo and set_optimizer_steps take the optimizer mutex. Rows read while
// applies run (the server's one-sided pulls) may be part-way through an
// update; the local store orders its reads with its own lock. Writing
// through data()/state() (a restore) is for a table nobody applies to yet.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "kernels/optimizers.h"
#include "kernels/sparse_accumulate.h"
#include "protocol/ps.pb.h"
#include "table/optimizer_state.h"
#include "table/step_fold.h"
#include "table/table.h"

namespace ps::table {

class ParamTable final : public Table {
 public:
  // Sets up `spec`'s optimizer and starts global rows [first_row, first_row
  // + num_rows) in `rows`: num_rows * dim floats, zero, owned by the caller
  // and outliving the table; an empty span: the table allocates them. The
  // spec is expected valid (protocol::ValidateTableSpec and
  // ValidateInitializer passed). kResourceExhausted when memory cannot be
  // had.
  static StatusOr<std::unique_ptr<ParamTable>> Create(
      const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
      std::span<float> rows = {});

  RowAccess access() const override { return RowAccess::kRegion; }
  uint64_t first_row() const override { return first_row_; }
  uint64_t num_rows() const override { return num_rows_; }
  float* data() const { return data_; }
  // How many optimizer state arrays there are (num_rows * dim floats each).
  int state_arrays() const { return optimizer_.arrays(); }
  float* state(int k) { return optimizer_.array(k); }
  // Rows and state in memory.
  uint64_t bytes() const override;

  // Applies gradients of local rows (each < num_rows(); rows.size() * dim
  // floats). `grads` is scratch: it may be scaled in place. kAtomic when
  // other threads may apply to this table at the same time. kOutOfRange for
  // a bad row (nothing applied then).
  Status Apply(std::span<const uint32_t> rows, std::span<float> grads,
               kernels::AccumulateMode mode);

  // From now on, pushes of the same training step (ApplyPush's `step`) are
  // folded into one optimizer step on their sum; not while applies run.
  // Returns false, and changes nothing, for sum and sgd: their adds sum the
  // pushes already.
  bool FoldPushesOfEachStep();
  // Apply for one worker's push of training step `step` (its clock): folded
  // with the step's other pushes when the table folds them, else as Apply.
  Status ApplyPush(uint64_t step, std::span<const uint32_t> rows,
                   std::span<float> grads, kernels::AccumulateMode mode);
  // Table: ApplyPush.
  Status ApplyRows(uint64_t step, std::span<const uint32_t> rows,
                   std::span<float> grads,
                   kernels::AccumulateMode mode) override {
    return ApplyPush(step, rows, grads, mode);
  }

  // A copy of the rows, the state arrays (state[0 .. state_arrays())) and
  // the step count, for a checkpoint.
  void CopyTo(std::vector<float>* values, std::vector<float>* state,
              uint64_t* optimizer_steps) const;
  uint64_t optimizer_steps() const;
  // A restore: also forgets the step being folded.
  void set_optimizer_steps(uint64_t steps);

  // Table: the rows as a checkpoint saves them; a restore writes straight
  // into the rows and state.
  Status Snapshot(TableSnapshot* out) const override;
  Status PrepareRestore(TableTarget* target) override;
  Status FinishRestore(TableTarget* target) override;

 private:
  explicit ParamTable(const proto::TableSpec& spec)
      : Table(spec), dim_(spec.dim()), optimizer_(spec) {}
  // The rows and state arrays, for the kernels.
  kernels::OptimizerTable optimizer_table() {
    return optimizer_.View(data_, num_rows_, dim_);
  }

  const uint32_t dim_;
  uint64_t first_row_ = 0;
  uint64_t num_rows_ = 0;
  std::vector<float> own_rows_;  // when the caller supplied no memory
  float* data_ = nullptr;
  mutable std::mutex optimizer_mu_;  // stateful optimizers' apply; copies
  OptimizerState optimizer_;         // steps guarded by optimizer_mu_
  std::unique_ptr<StepFold> fold_;   // null: no folding; guarded likewise
};

}  // namespace ps::table
