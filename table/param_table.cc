#include "table/param_table.h"

#include <new>

#include "base/huge_pages.h"
#include "protocol/table_config.h"
#include "table/initializer.h"

namespace ps::table {

StatusOr<std::unique_ptr<ParamTable>> ParamTable::Create(
    const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
    std::span<float> rows) {
  std::unique_ptr<ParamTable> t(new ParamTable(spec));
  t->first_row_ = first_row;
  t->num_rows_ = num_rows;
  const uint64_t floats = num_rows * spec.dim();
  if (rows.empty()) {
    try {
      t->own_rows_.assign(floats, 0.0f);
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("cannot allocate rows");
    }
    t->data_ = t->own_rows_.data();
  } else {
    if (rows.size() != floats) {
      return InvalidArgument("the rows' memory holds " +
                             std::to_string(rows.size()) + " floats, want " +
                             std::to_string(floats));
    }
    t->data_ = rows.data();
  }
  InitializeRows(spec.initializer(), first_row, num_rows, spec.dim(), t->data_);

  PS_RETURN_IF_ERROR(t->optimizer_.Resize(floats));
  return t;
}

uint64_t ParamTable::bytes() const {
  return num_rows_ * dim_ * sizeof(float) + optimizer_.bytes();
}

Status ParamTable::Apply(std::span<const uint32_t> rows, std::span<float> grads,
                         kernels::AccumulateMode mode) {
  if (!optimizer_.optimizer()) {
    const float scale = optimizer_.add_scale();
    if (scale != 1.0f) {
      for (float& g : grads) g *= scale;
    }
    return kernels::AccumulateRows(rows, grads, {data_, num_rows_, dim_}, mode);
  }
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  return kernels::ApplyOptimizerToRows(*optimizer_.optimizer(),
                                       optimizer_.NextStep(), optimizer_table(),
                                       rows, grads);
}

bool ParamTable::FoldPushesOfEachStep() {
  if (!optimizer_.optimizer()) return false;
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  fold_ = std::make_unique<StepFold>(dim_, optimizer_.arrays());
  return true;
}

Status ParamTable::ApplyPush(uint64_t step, std::span<const uint32_t> rows,
                             std::span<float> grads,
                             kernels::AccumulateMode mode) {
  // fold_ is set before applies start (FoldPushesOfEachStep).
  if (fold_ == nullptr) return Apply(rows, grads, mode);
  const kernels::OptimizerTable t = optimizer_table();
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  bool new_step = true;
  PS_RETURN_IF_ERROR(fold_->Fold(step, t, rows, grads, &new_step));
  if (new_step) optimizer_.NextStep();
  return kernels::ApplyOptimizerToRows(*optimizer_.optimizer(),
                                       optimizer_.steps(), t, rows, grads);
}

void ParamTable::CopyTo(std::vector<float>* values, std::vector<float>* state,
                        uint64_t* optimizer_steps) const {
  // Holding the lock the apply threads of a stateful optimizer take makes
  // the order of earlier applies and this copy visible (to TSan too); sum
  // and sgd apply without it and rely on the caller's protocol alone.
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  // On huge pages: a copy into fresh memory is mostly page faults
  // (base/huge_pages.h).
  const uint64_t floats = num_rows_ * dim_;
  ReserveOnHugePages(values, floats);
  values->insert(values->end(), data_, data_ + floats);
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    ReserveOnHugePages(&state[k], floats);
    state[k].insert(state[k].end(), optimizer_.array(k),
                    optimizer_.array(k) + floats);
  }
  *optimizer_steps = optimizer_.steps();
}

uint64_t ParamTable::optimizer_steps() const {
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  return optimizer_.steps();
}

void ParamTable::set_optimizer_steps(uint64_t steps) {
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  optimizer_.set_steps(steps);
  if (fold_ != nullptr) fold_->Forget();
}

Status ParamTable::Snapshot(TableSnapshot* out) const {
  out->first_row = first_row_;
  out->rows = num_rows_;
  out->state_arrays = optimizer_.arrays();
  // Nothing is applied during a checkpoint's cut (the workers wait in a
  // barrier), but that order runs through the workers and shared memory;
  // CopyTo takes the lock the apply threads of a stateful optimizer take,
  // which makes it visible here (and to TSan). SGD applies without a lock
  // and relies on the protocol alone.
  CopyTo(&out->values, out->state, &out->optimizer_steps);
  return Status::OK();
}

Status ParamTable::PrepareRestore(TableTarget* target) {
  target->state_arrays = optimizer_.arrays();
  target->first_row = first_row_;
  target->rows = num_rows_;
  target->values = data_;
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    target->state[k] = optimizer_.array(k);
  }
  return Status::OK();
}

Status ParamTable::FinishRestore(TableTarget* target) {
  set_optimizer_steps(target->optimizer_steps);
  return Status::OK();
}

}  // namespace ps::table
