#include "client/row_hash.h"

#include <bit>

#include "kernels/avx512_intrinsics.h"
#include "kernels/cpu_features.h"

namespace ps::worker {
namespace {

// The high 64 bits of a * b per lane, from four 32 x 32 -> 64 products
// (AVX-512 has a 64-bit low multiply but no high one).
[[gnu::target("avx512f,avx512dq")]] inline __m512i MulHi64(__m512i a,
                                                           __m512i b) {
  const __m512i lo32 = _mm512_set1_epi64(0xffffffff);
  const __m512i a_hi = _mm512_srli_epi64(a, 32);
  const __m512i b_hi = _mm512_srli_epi64(b, 32);
  const __m512i ll = _mm512_mul_epu32(a, b);
  const __m512i lh = _mm512_mul_epu32(a, b_hi);
  const __m512i hl = _mm512_mul_epu32(a_hi, b);
  const __m512i hh = _mm512_mul_epu32(a_hi, b_hi);
  // mid < 3 * 2^32: no carry is lost.
  const __m512i mid = _mm512_add_epi64(
      _mm512_add_epi64(_mm512_srli_epi64(ll, 32), _mm512_and_si512(lh, lo32)),
      _mm512_and_si512(hl, lo32));
  return _mm512_add_epi64(
      _mm512_add_epi64(hh, _mm512_srli_epi64(lh, 32)),
      _mm512_add_epi64(_mm512_srli_epi64(hl, 32), _mm512_srli_epi64(mid, 32)));
}

// RowHash::GlobalRow of HASHED keys, eight lanes at a time; the tail on the
// scalar path.
[[gnu::target("avx512f,avx512dq")]] void HashedRowsAvx512(const RowHash& h,
                                                          const uint64_t* keys,
                                                          size_t n,
                                                          uint64_t* rows) {
  const __m512i seed = _mm512_set1_epi64(static_cast<long long>(h.seed));
  const __m512i c1 =
      _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
  const __m512i c2 =
      _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
  const __m512i cap = _mm512_set1_epi64(static_cast<long long>(h.capacity));
  const __m512i rec = _mm512_set1_epi64(static_cast<long long>(h.reciprocal));
  // A power-of-two capacity (a common table size) takes x mod capacity as a
  // mask: the same rows, without the five multiplies of the reduction. The
  // branch is the same for every block, so it predicts perfectly.
  const bool pow2 = std::has_single_bit(h.capacity);
  const __m512i mask =
      _mm512_set1_epi64(static_cast<long long>(h.capacity - 1));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512i x = _mm512_xor_si512(_mm512_loadu_si512(keys + i), seed);
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
    x = _mm512_mullo_epi64(x, c1);
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
    x = _mm512_mullo_epi64(x, c2);
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
    __m512i r;
    if (pow2) {
      r = _mm512_and_si512(x, mask);
    } else {
      const __m512i q = MulHi64(x, rec);
      r = _mm512_sub_epi64(x, _mm512_mullo_epi64(q, cap));
      r = _mm512_mask_sub_epi64(r, _mm512_cmpge_epu64_mask(r, cap), r, cap);
      r = _mm512_mask_sub_epi64(r, _mm512_cmpge_epu64_mask(r, cap), r, cap);
    }
    _mm512_storeu_si512(rows + i, r);
  }
  for (; i < n; ++i) rows[i] = h.GlobalRow(keys[i]);
}

}  // namespace

void RowHash::GlobalRows(const uint64_t* keys, size_t n, uint64_t* rows) const {
  if (dense) {
    for (size_t i = 0; i < n; ++i) rows[i] = keys[i];
  } else if (kernels::ActiveCpuFeatures().avx512) {
    HashedRowsAvx512(*this, keys, n, rows);
  } else {
    for (size_t i = 0; i < n; ++i) rows[i] = GlobalRow(keys[i]);
  }
}

}  // namespace ps::worker
