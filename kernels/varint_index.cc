#include "kernels/varint_index.h"

#include <string>

#include "kernels/avx512_intrinsics.h"
#include "kernels/cpu_features.h"
#include "kernels/varint_index_internal.h"

namespace ps::kernels {
namespace {

std::string Num(uint64_t v) { return std::to_string(v); }

Status EndsInside(const uint8_t* end, uint32_t i,
                  const internal::VarintCursor& cur) {
  return Corruption("index section (" + Num(end - cur.section) +
                    " bytes) ends inside index " + Num(i) + " of " +
                    Num(cur.total));
}

// The varints of rows[i] - rows[i - 1] for i in [from, to), from >= 1.
uint8_t* PutDeltas(const uint32_t* rows, size_t from, size_t to, uint8_t* p) {
  for (size_t i = from; i < to; ++i) p = PutVarint(p, rows[i] - rows[i - 1]);
  return p;
}

}  // namespace

namespace internal {

uint8_t* PutDeltaVarintsScalar(const uint32_t* rows, size_t n, uint8_t* p) {
  if (n == 0) return p;
  return PutDeltas(rows, 1, n, PutVarint(p, rows[0]));
}

[[gnu::target("avx512f")]] uint8_t* PutDeltaVarintsAvx512(const uint32_t* rows,
                                                          size_t n,
                                                          uint8_t* p) {
  if (n == 0) return p;
  p = PutVarint(p, rows[0]);
  const __m512i one_byte = _mm512_set1_epi32(0x7f);
  size_t i = 1;
  for (; i + 16 <= n; i += 16) {
    const __m512i deltas = _mm512_sub_epi32(_mm512_loadu_si512(rows + i),
                                            _mm512_loadu_si512(rows + i - 1));
    if (_mm512_cmpgt_epu32_mask(deltas, one_byte) == 0) {
      // Each delta is its own one-byte varint: narrow and store all 16.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                       _mm512_cvtepi32_epi8(deltas));
      p += 16;
    } else {
      p = PutDeltas(rows, i, i + 16, p);
    }
  }
  return PutDeltas(rows, i, n, p);
}

}  // namespace internal

uint8_t* PutDeltaVarints(const uint32_t* rows, size_t n, uint8_t* p) {
  return ActiveCpuFeatures().avx512
             ? internal::PutDeltaVarintsAvx512(rows, n, p)
             : internal::PutDeltaVarintsScalar(rows, n, p);
}

namespace internal {

template <bool kStore>
Status DecodeVarintsScalar(const uint8_t* end, uint32_t until, uint32_t* out,
                           VarintCursor* cur) {
  const uint8_t* p = cur->p;
  uint64_t row = cur->row;
  bool zero_delta = cur->zero_delta;
  uint32_t i = cur->done;
  for (; i < until; ++i) {
    uint32_t delta;
    if (end - p >= 5) {  // room for the longest varint: no per-byte checks
      uint32_t b = p[0];
      delta = b & 0x7f;
      if (b < 0x80) {
        p += 1;
      } else {
        b = p[1];
        delta |= (b & 0x7f) << 7;
        if (b < 0x80) {
          p += 2;
        } else {
          b = p[2];
          delta |= (b & 0x7f) << 14;
          if (b < 0x80) {
            p += 3;
          } else {
            b = p[3];
            delta |= (b & 0x7f) << 21;
            if (b < 0x80) {
              p += 4;
            } else {
              b = p[4];
              if (b > 0x0f)
                return Corruption("varint index " + Num(i) +
                                  " does not fit in 32 bits");
              delta |= b << 28;
              p += 5;
            }
          }
        }
      }
    } else {
      delta = 0;
      int shift = 0;
      for (;;) {
        if (p >= end) return EndsInside(end, i, *cur);
        uint32_t b = *p++;
        if (shift == 28 && b > 0x0f)
          return Corruption("varint index " + Num(i) +
                            " does not fit in 32 bits");
        delta |= (b & 0x7f) << shift;
        if (b < 0x80) break;
        shift += 7;
      }
    }
    zero_delta |= (i > 0) & (delta == 0);
    row += delta;
    if constexpr (kStore) out[i] = static_cast<uint32_t>(row);
  }
  cur->p = p;
  cur->row = row;
  cur->zero_delta = zero_delta;
  cur->done = i;
  return Status::OK();
}

template Status DecodeVarintsScalar<true>(const uint8_t*, uint32_t, uint32_t*,
                                          VarintCursor*);
template Status DecodeVarintsScalar<false>(const uint8_t*, uint32_t, uint32_t*,
                                           VarintCursor*);

}  // namespace internal

template <bool kStore>
Status DecodeDeltaVarints(const uint8_t* section, size_t bytes, uint32_t n,
                          uint32_t* out, DeltaVarintSummary* summary) {
  const uint8_t* const end = section + bytes;
  internal::VarintCursor cur;
  cur.section = section;
  cur.total = n;
  cur.p = section;
  if constexpr (kStore) {
    // The first index alone (it may be 0), then the bulk eight bytes at a
    // time where the CPU can, then the rest with every check.
    if (n > 0 && ActiveCpuFeatures().avx2) {
      PS_RETURN_IF_ERROR(
          internal::DecodeVarintsScalar<true>(end, 1, out, &cur));
      internal::DecodeVarintsAvx2(end, n, out, &cur);
    }
  }
  PS_RETURN_IF_ERROR(internal::DecodeVarintsScalar<kStore>(end, n, out, &cur));
  if (cur.p != end)
    return Corruption("index section has " + Num(end - cur.p) +
                      " bytes left after " + Num(n) + " indices");
  summary->last = cur.row;
  summary->zero_delta = cur.zero_delta;
  return Status::OK();
}

template Status DecodeDeltaVarints<true>(const uint8_t*, size_t, uint32_t,
                                         uint32_t*, DeltaVarintSummary*);
template Status DecodeDeltaVarints<false>(const uint8_t*, size_t, uint32_t,
                                          uint32_t*, DeltaVarintSummary*);

}  // namespace ps::kernels
