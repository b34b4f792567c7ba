#include "table/choice_names.h"

namespace ps::table {

StatusOr<InitializerKind> InitializerKindOf(const std::string& name) {
  if (name.empty() || name == "zeros") return InitializerKind::kZeros;
  if (name == "uniform") return InitializerKind::kUniform;
  if (name == "normal") return InitializerKind::kNormal;
  return InvalidArgument("unknown initializer '" + name +
                         "' (zeros, uniform, normal)");
}

OptimizerName OptimizerNameOf(const proto::OptimizerSpec& spec) {
  OptimizerName n;
  n.shown = spec.name().empty() ? "sum" : spec.name();
  n.sum = n.shown == "sum";
  return n;
}

}  // namespace ps::table
