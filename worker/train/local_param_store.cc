#include "worker/train/local_param_store.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <new>
#include <unordered_map>

#include "protocol/table_config.h"
#include "table/initializer.h"

namespace ps::train {

StatusOr<std::unique_ptr<LocalParamStore>> LocalParamStore::Create(
    const proto::TableConfig& config) {
  std::unique_ptr<LocalParamStore> store(new LocalParamStore());
  for (const proto::TableSpec& spec : config.table()) {
    const std::string where = "table " + spec.name();
    PS_RETURN_IF_ERROR(protocol::ValidateTableSpec(spec));
    PS_RETURN_IF_ERROR(table::ValidateInitializer(spec.initializer()));
    if (spec.kind() == proto::EXACT) {
      return NotSupported(where + ": EXACT tables need a server (not --local)");
    }
    if (spec.capacity() > std::numeric_limits<uint32_t>::max()) {
      return InvalidArgument(where + ": capacity above 2^32 rows");
    }
    auto t = std::make_unique<Table>(spec);
    auto params = table::ParamTable::Create(spec, 0, spec.capacity());
    if (!params.ok()) return params.status().WithContext(where);
    t->params = std::move(*params);
    store->tables_.push_back(std::move(t));
  }
  return store;
}

const proto::TableSpec* LocalParamStore::table(const std::string& name) const {
  for (const auto& t : tables_) {
    if (t->spec.name() == name) return &t->spec;
  }
  return nullptr;
}

StatusOr<LocalParamStore::Table*> LocalParamStore::Find(
    uint32_t table_id) const {
  for (const auto& t : tables_) {
    if (t->spec.id() == table_id) return t.get();
  }
  return NotFound("no table with id " + std::to_string(table_id));
}

Status LocalParamStore::Pull(uint32_t table_id, std::span<const uint64_t> keys,
                             std::span<float> out) {
  PS_ASSIGN_OR_RETURN(Table * t, Find(table_id));
  const uint32_t dim = t->spec.dim();
  if (out.size() != keys.size() * dim) {
    return InvalidArgument("pull: out holds " + std::to_string(out.size()) +
                           " floats, want " +
                           std::to_string(keys.size() * dim));
  }
  const bool dense = t->spec.kind() == proto::DENSE;
  std::shared_lock lock(t->mu);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (dense && keys[i] >= t->spec.capacity()) {
      return OutOfRange("pull: dense row " + std::to_string(keys[i]));
    }
    const float* row = t->params->data() + t->map.GlobalRow(keys[i]) * dim;
    std::copy(row, row + dim, out.data() + i * dim);
  }
  return Status::OK();
}

Status LocalParamStore::Push(uint32_t table_id, std::span<const uint64_t> keys,
                             std::span<const float> grads) {
  PS_ASSIGN_OR_RETURN(Table * t, Find(table_id));
  const uint32_t dim = t->spec.dim();
  if (grads.size() != keys.size() * dim) {
    return InvalidArgument("push: grads hold " + std::to_string(grads.size()) +
                           " floats, want " +
                           std::to_string(keys.size() * dim));
  }
  // Duplicate keys are summed first, as PsClient::Push does.
  std::unordered_map<uint64_t, uint32_t> index;
  index.reserve(keys.size());
  std::vector<uint32_t> rows;
  std::vector<float> summed;
  rows.reserve(keys.size());
  summed.reserve(grads.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (t->spec.kind() == proto::DENSE && keys[i] >= t->spec.capacity()) {
      return OutOfRange("push: dense row " + std::to_string(keys[i]));
    }
    auto [it, fresh] =
        index.emplace(keys[i], static_cast<uint32_t>(rows.size()));
    const float* g = grads.data() + i * dim;
    if (fresh) {
      rows.push_back(static_cast<uint32_t>(t->map.GlobalRow(keys[i])));
      summed.insert(summed.end(), g, g + dim);
    } else {
      float* s = summed.data() + size_t{it->second} * dim;
      for (uint32_t j = 0; j < dim; ++j) s[j] += g[j];
    }
  }
  std::unique_lock lock(t->mu);
  return t->params->Apply(rows, summed, kernels::AccumulateMode::kExclusive);
}

Status LocalParamStore::PullDense(uint32_t table_id, std::span<float> out) {
  PS_ASSIGN_OR_RETURN(Table * t, Find(table_id));
  if (t->spec.kind() != proto::DENSE) {
    return InvalidArgument("table " + t->spec.name() + " is not DENSE");
  }
  const size_t floats = t->params->num_rows() * t->params->dim();
  if (out.size() != floats) {
    return InvalidArgument("pull dense: want " + std::to_string(floats) +
                           " floats");
  }
  std::shared_lock lock(t->mu);
  std::copy_n(t->params->data(), floats, out.begin());
  return Status::OK();
}

Status LocalParamStore::PushDense(uint32_t table_id,
                                  std::span<const float> grads) {
  PS_ASSIGN_OR_RETURN(Table * t, Find(table_id));
  if (t->spec.kind() != proto::DENSE) {
    return InvalidArgument("table " + t->spec.name() + " is not DENSE");
  }
  const size_t floats = t->params->num_rows() * t->params->dim();
  if (grads.size() != floats) {
    return InvalidArgument("push dense: want " + std::to_string(floats) +
                           " floats");
  }
  // A whole-table push is every row once, in order; the apply may scale
  // its gradients in place, so it gets a copy.
  std::vector<uint32_t> rows(t->spec.capacity());
  for (uint32_t r = 0; r < rows.size(); ++r) rows[r] = r;
  std::vector<float> scratch(grads.begin(), grads.end());
  std::unique_lock lock(t->mu);
  return t->params->Apply(rows, scratch, kernels::AccumulateMode::kExclusive);
}

StatusOr<std::vector<float>> LocalParamStore::Row(uint32_t table_id,
                                                  uint64_t key) const {
  PS_ASSIGN_OR_RETURN(Table * t, Find(table_id));
  const uint32_t dim = t->spec.dim();
  std::shared_lock lock(t->mu);
  const float* row = t->params->data() + t->map.GlobalRow(key) * dim;
  return std::vector<float>(row, row + dim);
}

Status LocalParamStore::KeepCopy() {
  try {
    for (auto& t : tables_) {
      std::shared_lock<std::shared_mutex> lock(t->mu);
      PS_RETURN_IF_ERROR(t->params->Snapshot(&t->kept));
    }
  } catch (const std::bad_alloc&) {
    has_copy_ = false;
    return ResourceExhausted(
        "no memory for a copy of the best parameters (--early_stop with "
        "--local keeps one): lower the tables' capacity");
  }
  has_copy_ = true;
  return Status::OK();
}

Status LocalParamStore::RestoreCopy() {
  if (!has_copy_) return NotInitialized("no copy of the parameters kept");
  for (auto& t : tables_) {
    std::unique_lock<std::shared_mutex> lock(t->mu);
    table::TableTarget target;
    target.spec = t->spec;
    PS_RETURN_IF_ERROR(t->params->PrepareRestore(&target));
    std::copy(t->kept.values.begin(), t->kept.values.end(), target.values);
    for (int k = 0; k < target.state_arrays; ++k) {
      std::copy(t->kept.state[k].begin(), t->kept.state[k].end(),
                target.state[k]);
    }
    target.optimizer_steps = t->kept.optimizer_steps;
    PS_RETURN_IF_ERROR(t->params->FinishRestore(&target));
  }
  return Status::OK();
}

}  // namespace ps::train
