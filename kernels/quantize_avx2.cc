// AVX2 + F16C paths of quantize.h; this file is compiled with -mavx2 -mf16c
// -mfma and only called after ActiveCpuFeatures() reported those features.
// Tails shorter than a vector go through the scalar code so both paths agree
// bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quantize.h"
#include "kernels/quantize_internal.h"

namespace ps::kernels::internal {

void QuantizeFp16Avx2(const float* in, size_t n, uint16_t* out) {
  const __m256 hi = _mm256_set1_ps(65504.0f), lo = _mm256_set1_ps(-65504.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // min/max return their second operand for NaN, so NaN passes through.
    __m256 v = _mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_loadu_ps(in + i)));
    __m128i h =
        _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  QuantizeFp16Scalar(in + i, n - i, out + i);
}

void DequantizeFp16Avx2(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  DequantizeFp16Scalar(in + i, n - i, out + i);
}

void QuantizeBf16Avx2(const float* in, size_t n, uint16_t* out) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i max_finite = _mm256_set1_epi32(0x7f7f0000);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i round_bias = _mm256_set1_epi32(0x7fff);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(in + i));
    __m256i abs = _mm256_and_si256(bits, abs_mask);
    __m256i is_nan = _mm256_cmpgt_epi32(abs, inf);
    __m256i is_big = _mm256_cmpgt_epi32(abs, max_finite);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(round_bias, odd)), 16);
    __m256i high = _mm256_srli_epi32(bits, 16);
    __m256i saturated =
        _mm256_or_si256(_mm256_and_si256(high, _mm256_set1_epi32(0x8000)),
                        _mm256_set1_epi32(0x7f7f));
    __m256i quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
    __m256i r = _mm256_blendv_epi8(rounded, saturated, is_big);
    r = _mm256_blendv_epi8(r, quiet_nan, is_nan);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r),
                                      _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  QuantizeBf16Scalar(in + i, n - i, out + i);
}

void DequantizeBf16Avx2(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(w));
  }
  DequantizeBf16Scalar(in + i, n - i, out + i);
}

namespace {

// Largest |v| of a block, and whether all values are finite.
float BlockMaxAbs(const float* in, size_t n, bool* finite) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff);
  __m256 vmax = _mm256_setzero_ps();
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_and_ps(_mm256_loadu_ps(in + i), abs_mask);
    bad = _mm256_or_si256(
        bad, _mm256_cmpgt_epi32(_mm256_castps_si256(a), max_finite));
    vmax = _mm256_max_ps(vmax, a);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float m = 0.0f;
  for (float l : lanes) m = l > m ? l : m;
  bool ok = _mm256_testz_si256(bad, bad);
  for (; i < n; ++i) {
    float a = std::fabs(in[i]);
    ok &= std::isfinite(a);
    m = a > m ? a : m;
  }
  *finite = ok;
  return m;
}

}  // namespace

void QuantizeInt8Avx2(const float* in, size_t n, size_t block, int8_t* out,
                      float* scales) {
  for (size_t b = 0, start = 0; start < n; ++b, start += block) {
    size_t len = std::min(block, n - start);
    bool finite = true;
    float max_abs = BlockMaxAbs(in + start, len, &finite);
    float scale = finite ? Int8ScaleFor(max_abs) : NAN;
    scales[b] = scale;
    if (!(scale > 0.0f)) {
      std::memset(out + start, 0, len);
      continue;
    }
    const __m256 vscale = _mm256_set1_ps(scale);
    const __m256 qmax = _mm256_set1_ps(127.0f), qmin = _mm256_set1_ps(-127.0f);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      __m256 q = _mm256_div_ps(_mm256_loadu_ps(in + start + i), vscale);
      q = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q = _mm256_min_ps(_mm256_max_ps(q, qmin), qmax);
      __m256i q32 = _mm256_cvtps_epi32(q);
      __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q32),
                                    _mm256_extracti128_si256(q32, 1));
      __m128i q8 = _mm_packs_epi16(q16, q16);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + start + i), q8);
    }
    QuantizeInt8BlockScalar(in + start + i, len - i, scale, out + start + i);
  }
}

void DequantizeInt8Avx2(const int8_t* in, size_t n, size_t block,
                        const float* scales, float* out) {
  for (size_t b = 0, start = 0; start < n; ++b, start += block) {
    size_t len = std::min(block, n - start);
    const __m256 scale = _mm256_set1_ps(scales[b]);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      __m128i q8 =
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + start + i));
      __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
      _mm256_storeu_ps(out + start + i, _mm256_mul_ps(v, scale));
    }
    for (; i < len; ++i) {
      out[start + i] = static_cast<float>(in[start + i]) * scales[b];
    }
  }
}

}  // namespace ps::kernels::internal
