#include "kernels/optimizers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu_features.h"
#include "kernels/internal/optimizer_kernels.h"
#include "kernels/row_bounds.h"

namespace ps::kernels {
namespace internal {
namespace {

void SgdScalar(const SgdConfig& c, float* w, const float* g, size_t n) {
  for (size_t i = 0; i < n; ++i) SgdElement(c, w[i], g[i]);
}

void MomentumScalar(const MomentumConfig& c, float* w, float* v, const float* g,
                    size_t n) {
  for (size_t i = 0; i < n; ++i) MomentumElement(c, w[i], v[i], g[i]);
}

void AdagradScalar(const AdagradConfig& c, float* w, float* acc, const float* g,
                   size_t n) {
  for (size_t i = 0; i < n; ++i) AdagradElement(c, w[i], acc[i], g[i]);
}

void AdamScalar(const AdamStepConstants& c, float* w, float* m, float* v,
                const float* g, size_t n) {
  for (size_t i = 0; i < n; ++i) AdamElement(c, w[i], m[i], v[i], g[i]);
}

void FtrlScalar(const FtrlConfig& c, float* w, float* z, float* nsum,
                const float* g, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float grad = g[i];
    const float n_old = nsum[i];
    const float n_new = n_old + grad * grad;
    const float sqrt_n_new = std::sqrt(n_new);
    const float sigma = (sqrt_n_new - std::sqrt(n_old)) / c.alpha;
    z[i] += grad - sigma * w[i];
    nsum[i] = n_new;
    const float zi = z[i];
    if (std::fabs(zi) <= c.l1) {
      w[i] = 0.0f;
    } else {
      w[i] = -(zi - std::copysign(c.l1, zi)) /
             ((c.beta + sqrt_n_new) / c.alpha + c.l2);
    }
  }
}

constexpr OptimizerKernelSet kScalarKernels = {
    "scalar", SgdScalar, MomentumScalar, AdagradScalar, AdamScalar, FtrlScalar,
};

struct Shape {
  int states;
  const char* name;
};

Shape ShapeOf(const OptimizerConfig& config) {
  struct Visitor {
    Shape operator()(const SgdConfig&) const { return {0, "sgd"}; }
    Shape operator()(const MomentumConfig&) const { return {1, "momentum"}; }
    Shape operator()(const AdagradConfig&) const { return {1, "adagrad"}; }
    Shape operator()(const AdamConfig&) const { return {2, "adam"}; }
    Shape operator()(const FtrlConfig&) const { return {2, "ftrl"}; }
  };
  return std::visit(Visitor{}, config);
}

// Runs the config's update on n contiguous floats at offset `at` of params
// and of each state array.
struct SpanUpdater {
  const OptimizerKernelSet& k;
  const OptimizerConfig& config;
  AdamStepConstants adam;

  void operator()(float* params, float* const* state, const float* g, size_t at,
                  size_t n) const {
    float* w = params + at;
    switch (config.index()) {
      case 0:
        k.sgd(std::get<SgdConfig>(config), w, g, n);
        break;
      case 1:
        k.momentum(std::get<MomentumConfig>(config), w, state[0] + at, g, n);
        break;
      case 2:
        k.adagrad(std::get<AdagradConfig>(config), w, state[0] + at, g, n);
        break;
      case 3:
        k.adam(adam, w, state[0] + at, state[1] + at, g, n);
        break;
      case 4:
        k.ftrl(std::get<FtrlConfig>(config), w, state[0] + at, state[1] + at, g,
               n);
        break;
    }
  }
};

Status CheckStep(const OptimizerConfig& config, uint64_t step) {
  if (std::holds_alternative<AdamConfig>(config) && step == 0) {
    return InvalidArgument("adam: the step count starts at 1, got 0");
  }
  return Status::OK();
}

}  // namespace

AdamStepConstants MakeAdamStepConstants(const AdamConfig& c, uint64_t step) {
  // In double: beta2^t for t in the millions underflows gracefully and
  // 1 - beta^t keeps its digits.
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(static_cast<double>(c.beta1), t);
  const double bias2 = 1.0 - std::pow(static_cast<double>(c.beta2), t);
  return AdamStepConstants{
      c.learning_rate,
      c.beta1,
      c.beta2,
      c.epsilon,
      static_cast<float>(1.0 / bias1),
      static_cast<float>(1.0 / bias2),
  };
}

const OptimizerKernelSet& ScalarOptimizerKernels() { return kScalarKernels; }

const OptimizerKernelSet& ActiveOptimizerKernels() {
  const CpuFeatures& cpu = ActiveCpuFeatures();
  return cpu.avx2 && cpu.fma ? Avx2OptimizerKernels() : kScalarKernels;
}

Status ApplyOptimizerToRowsWith(const OptimizerKernelSet& kernels,
                                const OptimizerConfig& config, uint64_t step,
                                OptimizerTable table,
                                std::span<const uint32_t> rows,
                                std::span<const float> grads) {
  const Shape shape = ShapeOf(config);
  PS_RETURN_IF_ERROR(CheckStep(config, step));
  if (rows.empty()) return Status::OK();
  const size_t dim = table.dim;
  if (dim == 0 || table.params == nullptr) {
    return InvalidArgument(std::string(shape.name) +
                           ": table has no parameter storage");
  }
  for (int s = 0; s < shape.states; ++s) {
    if (table.state[s] == nullptr) {
      return InvalidArgument(std::string(shape.name) + ": state array " +
                             std::to_string(s) + " is missing");
    }
  }
  if (grads.size() != rows.size() * dim) {
    return InvalidArgument(
        std::string(shape.name) + ": " + std::to_string(rows.size()) +
        " rows of dim " + std::to_string(dim) + " need " +
        std::to_string(rows.size() * dim) + " gradient values, got " +
        std::to_string(grads.size()));
  }
  PS_RETURN_IF_ERROR(
      internal::CheckRowBounds(rows, table.num_rows, shape.name));

  SpanUpdater update{kernels, config, {}};
  if (const auto* adam = std::get_if<AdamConfig>(&config)) {
    update.adam = MakeAdamStepConstants(*adam, step);
  }
  // Rows are scattered: fetch the parameters and state of a row a few
  // iterations ahead so the cache misses of several rows overlap.
  constexpr size_t kPrefetchRows = 8;
  constexpr size_t kFloatsPerLine = 16;
  const auto prefetch_row = [&](uint32_t row) {
    const size_t at = static_cast<size_t>(row) * dim;
    for (size_t off = 0; off < dim; off += kFloatsPerLine) {
      __builtin_prefetch(table.params + at + off, 1, 3);
      for (int s = 0; s < shape.states; ++s) {
        __builtin_prefetch(table.state[s] + at + off, 1, 3);
      }
    }
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i + kPrefetchRows < rows.size()) prefetch_row(rows[i + kPrefetchRows]);
    update(table.params, table.state, grads.data() + i * dim,
           static_cast<size_t>(rows[i]) * dim, dim);
  }
  return Status::OK();
}

Status ApplyOptimizerDenseWith(const OptimizerKernelSet& kernels,
                               const OptimizerConfig& config, uint64_t step,
                               std::span<float> params,
                               std::span<const std::span<float>> state,
                               std::span<const float> grads) {
  const Shape shape = ShapeOf(config);
  PS_RETURN_IF_ERROR(CheckStep(config, step));
  const size_t n = params.size();
  if (grads.size() != n) {
    return InvalidArgument(std::string(shape.name) + ": " + std::to_string(n) +
                           " parameters but " + std::to_string(grads.size()) +
                           " gradient values");
  }
  if (state.size() < static_cast<size_t>(shape.states)) {
    return InvalidArgument(
        std::string(shape.name) + " needs " + std::to_string(shape.states) +
        " state arrays, got " + std::to_string(state.size()));
  }
  float* state_ptrs[kMaxOptimizerStates] = {nullptr, nullptr};
  for (int s = 0; s < shape.states; ++s) {
    if (state[s].size() != n) {
      return InvalidArgument(std::string(shape.name) + ": state array " +
                             std::to_string(s) + " holds " +
                             std::to_string(state[s].size()) +
                             " floats, parameters " + std::to_string(n));
    }
    state_ptrs[s] = state[s].data();
  }
  if (n == 0) return Status::OK();

  SpanUpdater update{kernels, config, {}};
  if (const auto* adam = std::get_if<AdamConfig>(&config)) {
    update.adam = MakeAdamStepConstants(*adam, step);
  }
  update(params.data(), state_ptrs, grads.data(), 0, n);
  return Status::OK();
}

}  // namespace internal

int StateFloatsPerParameter(const OptimizerConfig& config) {
  return internal::ShapeOf(config).states;
}

Status ValidateOptimizerConfig(const OptimizerConfig& config) {
  auto positive = [](float x) { return std::isfinite(x) && x > 0.0f; };
  auto non_negative = [](float x) { return std::isfinite(x) && x >= 0.0f; };
  auto unit = [](float x) { return std::isfinite(x) && x >= 0.0f && x < 1.0f; };
  struct Visitor {
    decltype(positive) pos;
    decltype(non_negative) nonneg;
    decltype(unit) in_unit;
    Status operator()(const SgdConfig& c) const {
      if (!pos(c.learning_rate)) {
        return InvalidArgument("sgd: learning_rate must be > 0");
      }
      return Status::OK();
    }
    Status operator()(const MomentumConfig& c) const {
      if (!pos(c.learning_rate) || !in_unit(c.momentum)) {
        return InvalidArgument(
            "momentum: learning_rate must be > 0 and momentum in [0, 1)");
      }
      return Status::OK();
    }
    Status operator()(const AdagradConfig& c) const {
      if (!pos(c.learning_rate) || !pos(c.epsilon) ||
          !nonneg(c.initial_accumulator)) {
        return InvalidArgument(
            "adagrad: learning_rate and epsilon must be > 0, "
            "initial_accumulator >= 0");
      }
      return Status::OK();
    }
    Status operator()(const AdamConfig& c) const {
      if (!pos(c.learning_rate) || !pos(c.epsilon) || !in_unit(c.beta1) ||
          !in_unit(c.beta2)) {
        return InvalidArgument(
            "adam: learning_rate and epsilon must be > 0, beta1 and beta2 in "
            "[0, 1)");
      }
      return Status::OK();
    }
    Status operator()(const FtrlConfig& c) const {
      if (!pos(c.alpha) || !nonneg(c.beta) || !nonneg(c.l1) || !nonneg(c.l2)) {
        return InvalidArgument("ftrl: alpha must be > 0, beta, l1 and l2 >= 0");
      }
      return Status::OK();
    }
  };
  return std::visit(Visitor{positive, non_negative, unit}, config);
}

Status ApplyOptimizerToRows(const OptimizerConfig& config, uint64_t step,
                            OptimizerTable table,
                            std::span<const uint32_t> rows,
                            std::span<const float> grads) {
  return internal::ApplyOptimizerToRowsWith(internal::ActiveOptimizerKernels(),
                                            config, step, table, rows, grads);
}

Status ApplyOptimizerDense(const OptimizerConfig& config, uint64_t step,
                           std::span<float> params,
                           std::span<const std::span<float>> state,
                           std::span<const float> grads) {
  return internal::ApplyOptimizerDenseWith(internal::ActiveOptimizerKernels(),
                                           config, step, params, state, grads);
}

}  // namespace ps::kernels
