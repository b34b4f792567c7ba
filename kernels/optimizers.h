// Optimizers: how a gradient changes parameters. Each optimizer is a small
// config struct of hyper-parameters; the same update runs
//   (a) on given rows of a table (row ids + one gradient row per id), which is
//       how a server applies a decoded sparse push, and
//   (b) on a dense vector (dense tables, model weights).
//
// Optimizer state (momentum, accumulators, Adam moments, FTRL z and n) lives
// in arrays the caller owns, each shaped exactly like the parameters
// (num_rows x dim, row-major): StateFloatsPerParameter() says how many such
// arrays an optimizer needs, so a server allocates them from the config. The
// caller initializes the state: zeros, except Adagrad's accumulator, which
// starts at AdagradConfig::initial_accumulator.
//
// Updates per element, with g the gradient and w the parameter:
//   SGD       w -= lr * g
//   Momentum  v = momentum * v + g;  w -= lr * v
//   Adagrad   a += g * g;  w -= lr * g / (sqrt(a) + epsilon)
//   Adam      m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g
//             w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)
//   FTRL-Proximal (McMahan et al. 2013), per coordinate:
//             sigma = (sqrt(n + g * g) - sqrt(n)) / alpha
//             z += g - sigma * w;  n += g * g
//             w = |z| <= l1 ? 0
//                 : -(z - sign(z) * l1) / ((beta + sqrt(n)) / alpha + l2)
//
// Adam's step count t is GLOBAL, not per row: the caller passes it (the
// server counts optimizer steps per table, starting at 1). A per-row count
// would need one more state word per row and makes rarely seen rows take
// large, barely damped first steps; the global count is what lazy sparse Adam
// implementations use and keeps the state exactly "2 floats per parameter".
//
// Thread safety: an update is a plain read-modify-write. Two threads must not
// update the same row at once (a server gives each row one apply thread).
// Repeated row ids in one call are applied one after the other, each as its
// own step.
//
// SIMD: SGD, momentum, Adagrad and Adam have AVX2 paths used when the CPU has
// AVX2 and FMA (ActiveCpuFeatures()); FTRL runs the scalar path. Results of
// the two paths agree to float rounding (FMA contraction differs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "base/status.h"

namespace ps::kernels {

struct SgdConfig {
  float learning_rate = 0.01f;
};

struct MomentumConfig {
  float learning_rate = 0.01f;
  float momentum = 0.9f;
};

struct AdagradConfig {
  float learning_rate = 0.01f;
  float epsilon = 1e-8f;
  // The value the server fills the accumulator with before the first step;
  // a positive start keeps the first steps from being huge.
  float initial_accumulator = 0.1f;
};

struct AdamConfig {
  float learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

struct FtrlConfig {
  float alpha = 0.05f;  // learning-rate scale
  float beta = 1.0f;    // learning-rate smoothing
  float l1 = 0.0f;      // L1 strength: larger gives sparser weights
  float l2 = 0.0f;      // L2 strength
};

using OptimizerConfig = std::variant<SgdConfig, MomentumConfig, AdagradConfig,
                                     AdamConfig, FtrlConfig>;

// How many state arrays, each shaped like the parameters, the optimizer
// needs: SGD 0, momentum 1 (v), Adagrad 1 (accumulator), Adam 2 (m, v),
// FTRL 2 (z, n).
int StateFloatsPerParameter(const OptimizerConfig& config);

// The most state arrays any optimizer needs.
inline constexpr int kMaxOptimizerStates = 2;

// Checks hyper-parameters (finite, learning rates > 0, betas in [0, 1), ...).
// The Apply functions assume a validated config.
Status ValidateOptimizerConfig(const OptimizerConfig& config);

// Parameters and their state, num_rows x dim floats each, owned elsewhere.
// state[k] for k < StateFloatsPerParameter(config) must be non-null.
struct OptimizerTable {
  float* params = nullptr;
  float* state[kMaxOptimizerStates] = {nullptr, nullptr};
  uint64_t num_rows = 0;
  uint32_t dim = 0;
};

// Applies one step to row rows[i] with gradient grads[i * dim .. +dim), for
// every i. `step` is the 1-based global step count (used by Adam's bias
// correction; ignored by the others). Returns InvalidArgument for a size
// mismatch, missing state or step 0 with Adam, OutOfRange if a row id is
// >= num_rows; nothing is updated in either case.
Status ApplyOptimizerToRows(const OptimizerConfig& config, uint64_t step,
                            OptimizerTable table,
                            std::span<const uint32_t> rows,
                            std::span<const float> grads);

// Applies one step to a dense vector: params, grads and each of the
// StateFloatsPerParameter(config) state arrays hold the same number of floats
// (InvalidArgument otherwise; extra state entries are ignored).
Status ApplyOptimizerDense(const OptimizerConfig& config, uint64_t step,
                           std::span<float> params,
                           std::span<const std::span<float>> state,
                           std::span<const float> grads);

}  // namespace ps::kernels
