#include "protocol/table_runtime_config.h"

#include "protocol/spec_choices.h"
#include "protocol/table_config.h"

namespace ps::protocol {

StatusOr<TableRuntimeConfig> TableRuntimeConfig::FromSpec(
    const proto::TableSpec& spec) {
  PS_RETURN_IF_ERROR(ValidateTableSpec(spec));
  // ValidateTableSpec resolved every choice, so these succeed.
  TableRuntimeConfig c;
  PS_ASSIGN_OR_RETURN(c.optimizer_kind, OptimizerKindOf(spec.optimizer()));
  if (c.optimizer_kind != proto::OPTIMIZER_SUM) {
    PS_ASSIGN_OR_RETURN(c.optimizer, OptimizerFromSpec(spec.optimizer()));
  }
  PS_ASSIGN_OR_RETURN(c.sparsify, SparsifyMethodOf(spec.sparsify()));
  c.sparsify_epsilon = spec.sparsify().epsilon();
  c.topk_fraction = spec.sparsify().topk_fraction();
  PS_ASSIGN_OR_RETURN(c.initializer, InitializerKindOf(spec.initializer()));
  c.initializer_scale = spec.initializer().scale();
  c.initializer_seed = spec.initializer().seed();
  c.push_value_type = ValueTypeFromProto(spec.push_value_type());
  return c;
}

}  // namespace ps::protocol
