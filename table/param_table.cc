#include "table/param_table.h"

#include <new>

#include "protocol/table_config.h"
#include "table/initializer.h"

namespace ps::table {

ApplyRule ApplyRuleOf(const proto::TableSpec& spec) {
  ApplyRule rule;
  auto opt = protocol::OptimizerFromSpec(spec.optimizer());
  if (!opt.ok()) {
    rule.add_scale = 1.0f;  // "sum" (ValidateTableSpec refused the rest)
  } else if (auto* sgd = std::get_if<kernels::SgdConfig>(&*opt)) {
    rule.add_scale = -sgd->learning_rate;
  } else {
    rule.optimizer = *opt;
  }
  return rule;
}

float InitialStateValue(const kernels::OptimizerConfig& optimizer, int k) {
  if (k != 0) return 0.0f;
  if (auto* a = std::get_if<kernels::AdagradConfig>(&optimizer)) {
    return a->initial_accumulator;
  }
  return 0.0f;
}

StatusOr<std::unique_ptr<ParamTable>> ParamTable::Create(
    const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
    std::span<float> rows) {
  std::unique_ptr<ParamTable> t(new ParamTable);
  t->dim_ = spec.dim();
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

  const ApplyRule rule = ApplyRuleOf(spec);
  t->add_scale_ = rule.add_scale;
  t->optimizer_ = rule.optimizer;
  if (rule.optimizer.has_value()) {
    const kernels::OptimizerConfig& opt = *rule.optimizer;
    t->state_arrays_ = kernels::StateFloatsPerParameter(opt);
    try {
      for (int k = 0; k < t->state_arrays_; ++k) {
        t->state_[k].assign(floats, InitialStateValue(opt, k));
      }
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("cannot allocate optimizer state");
    }
  }
  return t;
}

uint64_t ParamTable::bytes() const {
  uint64_t bytes = num_rows_ * dim_ * sizeof(float);
  for (const auto& st : state_) bytes += st.size() * sizeof(float);
  return bytes;
}

Status ParamTable::Apply(std::span<const uint32_t> rows, std::span<float> grads,
                         kernels::AccumulateMode mode) {
  if (!optimizer_) {
    if (add_scale_ != 1.0f) {
      for (float& g : grads) g *= add_scale_;
    }
    return kernels::AccumulateRows(rows, grads, {data_, num_rows_, dim_}, mode);
  }
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  return kernels::ApplyOptimizerToRows(*optimizer_, ++optimizer_steps_,
                                       optimizer_table(), rows, grads);
}

bool ParamTable::FoldPushesOfEachStep() {
  if (!optimizer_) return false;
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  fold_ = std::make_unique<StepFold>(dim_, state_arrays_);
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
  if (new_step) ++optimizer_steps_;
  return kernels::ApplyOptimizerToRows(*optimizer_, optimizer_steps_, t, rows,
                                       grads);
}

kernels::OptimizerTable ParamTable::optimizer_table() {
  kernels::OptimizerTable t;
  t.params = data_;
  for (int k = 0; k < kernels::kMaxOptimizerStates; ++k) {
    t.state[k] = state_[k].empty() ? nullptr : state_[k].data();
  }
  t.num_rows = num_rows_;
  t.dim = dim_;
  return t;
}

void ParamTable::CopyTo(std::vector<float>* values, std::vector<float>* state,
                        uint64_t* optimizer_steps) const {
  // Holding the lock the apply threads of a stateful optimizer take makes
  // the order of earlier applies and this copy visible (to TSan too); sum
  // and sgd apply without it and rely on the caller's protocol alone.
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  values->assign(data_, data_ + num_rows_ * dim_);
  for (int k = 0; k < state_arrays_; ++k) state[k] = state_[k];
  *optimizer_steps = optimizer_steps_;
}

uint64_t ParamTable::optimizer_steps() const {
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  return optimizer_steps_;
}

void ParamTable::set_optimizer_steps(uint64_t steps) {
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  optimizer_steps_ = steps;
  if (fold_ != nullptr) fold_->Forget();
}

}  // namespace ps::table
