// AVX2 scanners of sparse_detect; compiled with -mavx2, called only when
// ActiveCpuFeatures() has avx2. A lookup table turns an 8-lane compare mask
// into the permutation that packs the selected lane numbers to the front.
#include <immintrin.h>

#include <array>

#include "kernels/sparse_detect.h"
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

// Writes base + lane for every set lane of mask at dst; returns the count.
inline int Compress(uint32_t mask, uint32_t base, uint32_t* dst) {
  __m256i lanes = _mm256_load_si256(
      reinterpret_cast<const __m256i*>(kCompress.lanes[mask].data()));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(dst),
      _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int>(base))));
  return __builtin_popcount(mask);
}

// Shared loop: `mask8(ptr)` gives the 8-bit selection mask of g[i..i+8).
template <typename Mask8, typename Tail>
inline void Scan(const float* g, size_t begin, size_t end, IndexBuffer* out,
                 Mask8 mask8, Tail tail) {
  size_t i = begin;
  for (; i + 32 <= end; i += 32) {
    uint32_t m0 = mask8(g + i), m1 = mask8(g + i + 8), m2 = mask8(g + i + 16),
             m3 = mask8(g + i + 24);
    // No branch on the masks: at ~1% density a quarter of the groups hold a
    // hit, too many to predict; storing empty compressions costs less.
    uint32_t* dst = out->Reserve(32 + 8);
    const uint32_t base = static_cast<uint32_t>(i);
    int n = Compress(m0, base, dst);
    n += Compress(m1, base + 8, dst + n);
    n += Compress(m2, base + 16, dst + n);
    n += Compress(m3, base + 24, dst + n);
    out->Commit(n);
  }
  tail(i);
}

}  // namespace

void ScanGeEpsAvx2(const float* g, size_t begin, size_t end, float eps,
                   IndexBuffer* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 veps = _mm256_set1_ps(eps);
  Scan(
      g, begin, end, out,
      [&](const float* p) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(p), abs_mask);
        return static_cast<uint32_t>(
            _mm256_movemask_ps(_mm256_cmp_ps(a, veps, _CMP_GE_OQ)));
      },
      [&](size_t i) { ScanGeEpsScalar(g, i, end, eps, out); });
}

void ScanGeKeyAvx2(const float* g, size_t begin, size_t end, uint32_t key,
                   IndexBuffer* out) {
  if (key == 0) {  // everything qualifies
    ScanGeKeyScalar(g, begin, end, key, out);
    return;
  }
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  // key >= 1 here, and keys are < 2^31, so a signed compare works.
  const __m256i below = _mm256_set1_epi32(static_cast<int>(key - 1));
  Scan(
      g, begin, end, out,
      [&](const float* p) {
        __m256i k =
            _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(p)), abs_mask);
        __m256i ge = _mm256_cmpgt_epi32(k, below);
        __m256i nan = _mm256_cmpgt_epi32(k, inf);  // NaN ranks like zero
        return static_cast<uint32_t>(_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_andnot_si256(nan, ge))));
      },
      [&](size_t i) { ScanGeKeyScalar(g, i, end, key, out); });
}

void ThresholdScanAvx2(const float* g, size_t begin, size_t end, float eps,
                       std::vector<uint32_t>* out) {
  IndexBuffer buf;
  ScanGeEpsAvx2(g, begin, end, eps, &buf);
  out->insert(out->end(), buf.data(), buf.data() + buf.size());
}

}  // namespace ps::kernels::internal
