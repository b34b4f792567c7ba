// TableRuntimeConfig: one table spec parsed once into the typed choices the
// server and the worker act on (optimizer kind and kernel config, sparsify
// method, initializer kind, push value type), so no code compares the
// spec's strings at run time.
//
// A value type: immutable once built, safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>

#include "base/status_or.h"
#include "kernels/optimizers.h"
#include "kernels/quantize.h"
#include "protocol/ps.pb.h"

namespace ps::protocol {

struct TableRuntimeConfig {
  proto::OptimizerKind optimizer_kind = proto::OPTIMIZER_SUM;
  // The kernels' optimizer; none for OPTIMIZER_SUM (gradients are added).
  std::optional<kernels::OptimizerConfig> optimizer;
  proto::SparsifyMethod sparsify = proto::SPARSIFY_NONE;
  float sparsify_epsilon = 0.0f;  // SPARSIFY_THRESHOLD (and NONE: 0)
  float topk_fraction = 0.0f;     // SPARSIFY_TOPK
  proto::InitializerKind initializer = proto::INITIALIZER_ZEROS;
  float initializer_scale = 0.0f;
  uint64_t initializer_seed = 0;
  kernels::ValueType push_value_type = kernels::ValueType::kFp32;

  // Validates `spec` (ValidateTableSpec) and resolves every choice (string
  // or enum; defaults where neither is given). kInvalidArgument naming the
  // table and the field.
  static StatusOr<TableRuntimeConfig> FromSpec(const proto::TableSpec& spec);
};

}  // namespace ps::protocol
