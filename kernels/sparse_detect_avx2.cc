// AVX2 scanners of sparse_detect; compiled with -mavx2, called only when
// ActiveCpuFeatures() has avx2. A lookup table turns an 8-lane compare mask
// into the permutation that packs the selected lanes to the front: added to
// the group's first index it gives the indices, applied to the loaded floats
// (vpermps) it gives their values.
#include <immintrin.h>

#include <array>

#include "kernels/sparse_detect_internal.h"

namespace ps::kernels::internal {
namespace {

struct CompressTable {
  alignas(32) std::array<std::array<uint32_t, 8>, 256> lanes{};
  constexpr CompressTable() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int l = 0; l < 8; ++l)
        if (m & (1 << l)) lanes[m][k++] = static_cast<uint32_t>(l);
    }
  }
};
constexpr CompressTable kCompress;

// How far ahead of the compares the loop asks for the gradient. The scan
// does enough work per cache line that the hardware prefetcher alone leaves
// the core waiting on loads (measured: ~0.3x of a plain read's bandwidth);
// requesting lines ~4 KiB ahead keeps enough misses in flight to stream.
constexpr size_t kPrefetchFloats = 1024;

// Writes base + lane (and, with kValues, the lane's float) for every set
// lane of `mask` at position n; returns the new n.
template <bool kValues>
inline size_t Put(uint32_t mask, uint32_t base, __m256 v, uint32_t* dst,
                  float* values, size_t n) {
  const __m256i lanes = _mm256_load_si256(
      reinterpret_cast<const __m256i*>(kCompress.lanes[mask].data()));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(dst + n),
      _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int>(base))));
  if constexpr (kValues)
    _mm256_storeu_ps(values + n, _mm256_permutevar8x32_ps(v, lanes));
  return n + static_cast<size_t>(__builtin_popcount(mask));
}

// The shared loop: `mask8(v)` gives the 8-bit selection mask of the 8 floats
// in v, `keep(x)` the same for one float (the tail).
template <bool kValues, typename Mask8, typename Keep>
inline size_t Scan(const float* g, size_t begin, size_t end, uint32_t* dst,
                   float* values, Mask8 mask8, Keep keep) {
  size_t n = 0, i = begin;
  for (; i + 32 <= end; i += 32) {
    // Prefetches past the end of the buffer are harmless: they never fault.
    _mm_prefetch(reinterpret_cast<const char*>(g + i + kPrefetchFloats),
                 _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(g + i + kPrefetchFloats + 16),
                 _MM_HINT_T0);
    const __m256 v0 = _mm256_loadu_ps(g + i), v1 = _mm256_loadu_ps(g + i + 8),
                 v2 = _mm256_loadu_ps(g + i + 16),
                 v3 = _mm256_loadu_ps(g + i + 24);
    const uint32_t m0 = mask8(v0), m1 = mask8(v1), m2 = mask8(v2),
                   m3 = mask8(v3);
    // No branch on the masks: at 1-10% density most groups of 32 hold a
    // hit, too many to predict; storing empty compressions costs less.
    const uint32_t base = static_cast<uint32_t>(i);
    n = Put<kValues>(m0, base, v0, dst, values, n);
    n = Put<kValues>(m1, base + 8, v1, dst, values, n);
    n = Put<kValues>(m2, base + 16, v2, dst, values, n);
    n = Put<kValues>(m3, base + 24, v3, dst, values, n);
  }
  for (; i < end; ++i) {  // the last < 32 entries, also branch-free
    dst[n] = static_cast<uint32_t>(i);
    if constexpr (kValues) values[n] = g[i];
    n += keep(g[i]) ? 1 : 0;
  }
  return n;
}

template <bool kValues>
size_t GeEps(const float* g, size_t begin, size_t end, float eps, uint32_t* dst,
             float* values) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 veps = _mm256_set1_ps(eps);
  return Scan<kValues>(
      g, begin, end, dst, values,
      [&](__m256 v) {
        // Ordered compare: NaN is never selected, as in the scalar path.
        return static_cast<uint32_t>(_mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), veps, _CMP_GE_OQ)));
      },
      [&](float x) { return __builtin_fabsf(x) >= eps; });
}

template <bool kValues>
size_t GeKey(const float* g, size_t begin, size_t end, uint32_t key,
             uint32_t* dst, float* values) {
  auto keep = [&](float x) {
    return MagnitudeKey(__builtin_bit_cast(uint32_t, x)) >= key;
  };
  if (key == 0)  // everything qualifies, NaN included
    return Scan<kValues>(
        g, begin, end, dst, values, [](__m256) { return 0xffu; }, keep);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  // key >= 1 here, and keys are < 2^31, so a signed compare works.
  const __m256i below = _mm256_set1_epi32(static_cast<int>(key - 1));
  return Scan<kValues>(
      g, begin, end, dst, values,
      [&](__m256 v) {
        __m256i k = _mm256_and_si256(_mm256_castps_si256(v), abs_mask);
        __m256i ge = _mm256_cmpgt_epi32(k, below);
        __m256i nan = _mm256_cmpgt_epi32(k, inf);  // NaN ranks like zero
        return static_cast<uint32_t>(_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_andnot_si256(nan, ge))));
      },
      keep);
}

}  // namespace

size_t ScanGeEpsAvx2(const float* g, size_t begin, size_t end, float eps,
                     uint32_t* dst, float* values) {
  return values != nullptr ? GeEps<true>(g, begin, end, eps, dst, values)
                           : GeEps<false>(g, begin, end, eps, dst, nullptr);
}

size_t ScanGeKeyAvx2(const float* g, size_t begin, size_t end, uint32_t key,
                     uint32_t* dst, float* values) {
  return values != nullptr ? GeKey<true>(g, begin, end, key, dst, values)
                           : GeKey<false>(g, begin, end, key, dst, nullptr);
}

}  // namespace ps::kernels::internal
