// The AVX2 + FMA optimizer loops. This file alone is compiled with -mavx2
// -mfma (kernels/CMakeLists.txt); its functions are reached only through
// Avx2OptimizerKernels(), which callers use only after ActiveCpuFeatures()
// reports AVX2 and FMA. Tails shorter than 8 floats use the shared scalar
// element functions.
#include <immintrin.h>

#include "kernels/internal/optimizer_kernels.h"

namespace ps::kernels::internal {
namespace {

constexpr size_t kLanes = 8;

void SgdAvx2(const SgdConfig& c, float* w, const float* g, size_t n) {
  const __m256 lr = _mm256_set1_ps(c.learning_rate);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 wv = _mm256_loadu_ps(w + i);
    const __m256 gv = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(w + i, _mm256_fnmadd_ps(lr, gv, wv));
  }
  for (; i < n; ++i) SgdElement(c, w[i], g[i]);
}

void MomentumAvx2(const MomentumConfig& c, float* w, float* v, const float* g,
                  size_t n) {
  const __m256 lr = _mm256_set1_ps(c.learning_rate);
  const __m256 mu = _mm256_set1_ps(c.momentum);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 vv = _mm256_fmadd_ps(mu, _mm256_loadu_ps(v + i), gv);
    _mm256_storeu_ps(v + i, vv);
    _mm256_storeu_ps(w + i, _mm256_fnmadd_ps(lr, vv, _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) MomentumElement(c, w[i], v[i], g[i]);
}

void AdagradAvx2(const AdagradConfig& c, float* w, float* acc, const float* g,
                 size_t n) {
  const __m256 lr = _mm256_set1_ps(c.learning_rate);
  const __m256 eps = _mm256_set1_ps(c.epsilon);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 av = _mm256_fmadd_ps(gv, gv, _mm256_loadu_ps(acc + i));
    _mm256_storeu_ps(acc + i, av);
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(av), eps);
    const __m256 step = _mm256_div_ps(_mm256_mul_ps(lr, gv), denom);
    _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_loadu_ps(w + i), step));
  }
  for (; i < n; ++i) AdagradElement(c, w[i], acc[i], g[i]);
}

void AdamAvx2(const AdamStepConstants& c, float* w, float* m, float* v,
              const float* g, size_t n) {
  const __m256 lr = _mm256_set1_ps(c.learning_rate);
  const __m256 b1 = _mm256_set1_ps(c.beta1);
  const __m256 b2 = _mm256_set1_ps(c.beta2);
  const __m256 one_minus_b1 = _mm256_set1_ps(1.0f - c.beta1);
  const __m256 one_minus_b2 = _mm256_set1_ps(1.0f - c.beta2);
  const __m256 inv_bias1 = _mm256_set1_ps(c.inv_bias1);
  const __m256 inv_bias2 = _mm256_set1_ps(c.inv_bias2);
  const __m256 eps = _mm256_set1_ps(c.epsilon);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 mv = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i),
                                      _mm256_mul_ps(one_minus_b1, gv));
    const __m256 vv =
        _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i),
                        _mm256_mul_ps(_mm256_mul_ps(one_minus_b2, gv), gv));
    _mm256_storeu_ps(m + i, mv);
    _mm256_storeu_ps(v + i, vv);
    const __m256 m_hat = _mm256_mul_ps(mv, inv_bias1);
    const __m256 v_hat = _mm256_mul_ps(vv, inv_bias2);
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(v_hat), eps);
    const __m256 step = _mm256_div_ps(_mm256_mul_ps(lr, m_hat), denom);
    _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_loadu_ps(w + i), step));
  }
  for (; i < n; ++i) AdamElement(c, w[i], m[i], v[i], g[i]);
}

}  // namespace

const OptimizerKernelSet& Avx2OptimizerKernels() {
  // FTRL's branchy update gains little from 8 lanes next to its two square
  // roots and a division; it shares the scalar loop.
  static const OptimizerKernelSet kAvx2Kernels = {
      "avx2",      SgdAvx2,  MomentumAvx2,
      AdagradAvx2, AdamAvx2, ScalarOptimizerKernels().ftrl,
  };
  return kAvx2Kernels;
}

}  // namespace ps::kernels::internal
