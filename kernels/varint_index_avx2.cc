// The AVX2 bulk decoder of varint_index_internal.h; compiled with -mavx2,
// called only when ActiveCpuFeatures() has avx2.
//
// At the densities a push sends, row deltas take one or two varint bytes at
// random, so a decoder that branches per varint mispredicts often. This one
// looks at eight bytes at once: their eight continuation bits index a table
// that says how many whole one- or two-byte varints start the eight bytes,
// how many bytes they take, and the byte shuffle that puts varint k into
// 16-bit lane k. The lanes' 7-bit halves are joined, widened to 32 bits and
// prefix-summed onto the running row: up to eight indices per step with no
// branch on the data.
#include <immintrin.h>

#include <array>

#include "kernels/varint_index_internal.h"

namespace ps::kernels::internal {
namespace {

struct Step {
  alignas(16) std::array<uint8_t, 16> shuffle{};  // 0x80: a zero byte
  uint8_t count = 0;     // whole varints (0: a long one comes first)
  uint8_t consumed = 0;  // bytes they take
};

struct StepTable {
  std::array<Step, 256> steps{};
  // Bit b of the index: byte b has its continuation bit set.
  constexpr StepTable() {
    for (int m = 0; m < 256; ++m) {
      Step& s = steps[m];
      for (auto& b : s.shuffle) b = 0x80;
      int pos = 0, k = 0;
      auto continues = [m](int b) { return ((m >> b) & 1) != 0; };
      while (pos < 8) {
        if (!continues(pos)) {  // one byte
          s.shuffle[2 * k] = static_cast<uint8_t>(pos);
          pos += 1;
        } else if (pos + 1 < 8 && !continues(pos + 1)) {  // two bytes
          s.shuffle[2 * k] = static_cast<uint8_t>(pos);
          s.shuffle[2 * k + 1] = static_cast<uint8_t>(pos + 1);
          pos += 2;
        } else {  // three or more, or cut by the end of the eight bytes
          break;
        }
        ++k;
      }
      s.count = static_cast<uint8_t>(k);
      s.consumed = static_cast<uint8_t>(pos);
    }
  }
};
constexpr StepTable kSteps;

}  // namespace

void DecodeVarintsAvx2(const uint8_t* end, uint32_t n, uint32_t* out,
                       VarintCursor* cur) {
  const uint8_t* p = cur->p;
  uint32_t done = cur->done;
  uint64_t row = cur->row;
  uint32_t low = static_cast<uint32_t>(row);  // row mod 2^32, as stored
  __m256i base = _mm256_set1_epi32(static_cast<int>(low));
  uint32_t zero = 0;
  const __m128i low7 = _mm_set1_epi16(0x007f), high7 = _mm_set1_epi16(0x7f00);
  const __m256i zeros = _mm256_setzero_si256();
  // Each step reads 8 bytes and stores 8 indices (those past `count` are
  // overwritten by the next step), so both must fit.
  while (end - p >= 8 && n - done >= 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const Step& s = kSteps.steps[_mm_movemask_epi8(bytes)];
    if (s.count == 0) break;  // a long varint: the scalar decoder's
    const __m128i lanes = _mm_shuffle_epi8(
        bytes,
        _mm_load_si128(reinterpret_cast<const __m128i*>(s.shuffle.data())));
    const __m128i delta16 =
        _mm_or_si128(_mm_and_si128(lanes, low7),
                     _mm_srli_epi16(_mm_and_si128(lanes, high7), 1));
    __m256i d = _mm256_cvtepu16_epi32(delta16);
    zero |= static_cast<uint32_t>(_mm256_movemask_ps(
                _mm256_castsi256_ps(_mm256_cmpeq_epi32(d, zeros)))) &
            ((1u << s.count) - 1);
    // Inclusive prefix sum of the 8 lanes: within each half, then the low
    // half's total onto the high half.
    d = _mm256_add_epi32(d, _mm256_slli_si256(d, 4));
    d = _mm256_add_epi32(d, _mm256_slli_si256(d, 8));
    __m256i carry = _mm256_shuffle_epi32(d, 0xff);
    carry = _mm256_permute2x128_si256(carry, carry, 0x08);
    const __m256i rows = _mm256_add_epi32(_mm256_add_epi32(d, carry), base);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + done), rows);
    base = _mm256_permutevar8x32_epi32(rows, _mm256_set1_epi32(s.count - 1));
    // The step's deltas sum to < 8 * 2^14, so the difference mod 2^32 is
    // exact and the 64-bit row stays exact (the caller rejects rows past
    // 2^32 by it).
    const uint32_t now = static_cast<uint32_t>(_mm256_cvtsi256_si32(base));
    row += now - low;
    low = now;
    p += s.consumed;
    done += s.count;
  }
  cur->p = p;
  cur->done = done;
  cur->row = row;
  cur->zero_delta |= zero != 0;
}

}  // namespace ps::kernels::internal
