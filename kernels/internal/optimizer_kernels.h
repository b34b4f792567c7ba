// Internal to kernels/: the element-wise optimizer loops behind
// kernels/optimizers.h, one set per instruction set, so tests (and
// benchmarks) can run the scalar and AVX2 paths side by side on the same
// input. Everyone else calls kernels/optimizers.h, which dispatches at run
// time.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/optimizers.h"

namespace ps::kernels::internal {

// Adam's per-step constants, computed once per call from the config and the
// step count: inv_bias1 = 1 / (1 - beta1^t), inv_bias2 = 1 / (1 - beta2^t).
struct AdamStepConstants {
  float learning_rate;
  float beta1;
  float beta2;
  float epsilon;
  float inv_bias1;
  float inv_bias2;
};
AdamStepConstants MakeAdamStepConstants(const AdamConfig& config,
                                        uint64_t step);

// Each function updates n contiguous parameters w with gradients g and the
// optimizer's state arrays, all n floats long.
struct OptimizerKernelSet {
  const char* name;
  void (*sgd)(const SgdConfig& c, float* w, const float* g, size_t n);
  void (*momentum)(const MomentumConfig& c, float* w, float* v, const float* g,
                   size_t n);
  void (*adagrad)(const AdagradConfig& c, float* w, float* acc, const float* g,
                  size_t n);
  void (*adam)(const AdamStepConstants& c, float* w, float* m, float* v,
               const float* g, size_t n);
  void (*ftrl)(const FtrlConfig& c, float* w, float* z, float* nsum,
               const float* g, size_t n);
};

// Portable C++; runs everywhere.
const OptimizerKernelSet& ScalarOptimizerKernels();
// AVX2 + FMA; call only when ActiveCpuFeatures() has both.
const OptimizerKernelSet& Avx2OptimizerKernels();
// Avx2OptimizerKernels() when the CPU allows, ScalarOptimizerKernels() else.
const OptimizerKernelSet& ActiveOptimizerKernels();

// The public Apply functions with an explicit kernel set.
Status ApplyOptimizerToRowsWith(const OptimizerKernelSet& kernels,
                                const OptimizerConfig& config, uint64_t step,
                                OptimizerTable table,
                                std::span<const uint32_t> rows,
                                std::span<const float> grads);
Status ApplyOptimizerDenseWith(const OptimizerKernelSet& kernels,
                               const OptimizerConfig& config, uint64_t step,
                               std::span<float> params,
                               std::span<const std::span<float>> state,
                               std::span<const float> grads);

// One element of each update, shared by the scalar set and the AVX2 tails so
// both follow the formulas in kernels/optimizers.h in the same order.
inline void SgdElement(const SgdConfig& c, float& w, float g) {
  w -= c.learning_rate * g;
}
inline void MomentumElement(const MomentumConfig& c, float& w, float& v,
                            float g) {
  v = c.momentum * v + g;
  w -= c.learning_rate * v;
}
inline void AdagradElement(const AdagradConfig& c, float& w, float& acc,
                           float g) {
  acc += g * g;
  w -= c.learning_rate * g / (std::sqrt(acc) + c.epsilon);
}
inline void AdamElement(const AdamStepConstants& c, float& w, float& m,
                        float& v, float g) {
  m = c.beta1 * m + (1.0f - c.beta1) * g;
  v = c.beta2 * v + (1.0f - c.beta2) * g * g;
  const float m_hat = m * c.inv_bias1;
  const float v_hat = v * c.inv_bias2;
  w -= c.learning_rate * m_hat / (std::sqrt(v_hat) + c.epsilon);
}

}  // namespace ps::kernels::internal
