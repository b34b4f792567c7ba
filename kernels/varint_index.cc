#include "kernels/varint_index.h"

#include <string>

namespace ps::kernels {
namespace {

std::string Num(uint64_t v) { return std::to_string(v); }

}  // namespace

template <bool kStore>
Status DecodeDeltaVarints(const uint8_t* section, size_t bytes, uint32_t n,
                          uint32_t* out, DeltaVarintSummary* summary) {
  const uint8_t* p = section;
  const uint8_t* const end = section + bytes;
  uint64_t row = 0;
  bool zero_delta = false;
  for (uint32_t i = 0; i < n; ++i) {
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
        if (p >= end)
          return Corruption("index section (" + Num(bytes) +
                            " bytes) ends inside index " + Num(i) + " of " +
                            Num(n));
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
  if (p != end)
    return Corruption("index section has " + Num(end - p) +
                      " bytes left after " + Num(n) + " indices");
  summary->last = row;
  summary->zero_delta = zero_delta;
  return Status::OK();
}

template Status DecodeDeltaVarints<true>(const uint8_t*, size_t, uint32_t,
                                         uint32_t*, DeltaVarintSummary*);
template Status DecodeDeltaVarints<false>(const uint8_t*, size_t, uint32_t,
                                          uint32_t*, DeltaVarintSummary*);

}  // namespace ps::kernels
