#include "kernels/quantize.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/quantize_internal.h"

namespace ps::kernels {

std::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kFp32:
      return "fp32";
    case ValueType::kFp16:
      return "fp16";
    case ValueType::kBf16:
      return "bf16";
    case ValueType::kInt8:
      return "int8";
  }
  return "unknown";
}

size_t ValueTypeBytes(ValueType type) {
  switch (type) {
    case ValueType::kFp32:
      return 4;
    case ValueType::kFp16:
    case ValueType::kBf16:
      return 2;
    case ValueType::kInt8:
      return 1;
  }
  return 0;
}

bool IsValidValueType(uint8_t raw) { return raw <= 3; }

uint16_t FloatToFp16(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) {  // NaN: quiet it, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00 | ((abs & 0x7fffff) >> 13));
  }
  if (abs >= 0x477fe000) return sign | 0x7bff;  // >= 65504: saturate
  if (abs >= 0x38800000) {                      // normal fp16
    uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000) >> 13));
  }
  // Subnormal or zero: adding 0.5 makes the FPU round |v| to a multiple of
  // 2^-24 (nearest even), which is the fp16 subnormal step.
  float shifted = std::bit_cast<float>(abs) + 0.5f;
  return static_cast<uint16_t>(sign |
                               (std::bit_cast<uint32_t>(shifted) - 0x3f000000));
}

float Fp16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    float mag = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
  }
  if (exp == 31) {
    uint32_t quiet = mant != 0 ? 0x400000 : 0;
    return std::bit_cast<float>(sign | 0x7f800000 | quiet | (mant << 13));
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToBf16(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  uint32_t abs = bits & 0x7fffffff;
  uint32_t sign = bits & 0x80000000;
  if (abs > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
  if (abs > 0x7f7f0000) return static_cast<uint16_t>((sign >> 16) | 0x7f7f);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

float Bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

float Int8ScaleFor(float max_abs) {
  if (std::isnan(max_abs) || std::isinf(max_abs)) return NAN;
  if (!(max_abs > 0.0f)) return 0.0f;
  float scale = max_abs / 127.0f;
  // Look for the nearest scale >= max_abs/127 that survives a round trip
  // through its own block maximum (127 * scale), so that quantizing
  // dequantized values reproduces the same scale: the ones tried first are
  // almost always fixed points already.
  for (int i = 0; i < 64; ++i) {
    float top = 127.0f * scale;
    if (std::isfinite(top) && top / 127.0f == scale) return scale;
    scale = std::nextafter(scale, INFINITY);
  }
  return max_abs / 127.0f;
}

namespace internal {

bool UseAvx2Quantize() {
  const CpuFeatures& f = ActiveCpuFeatures();
  return f.avx2 && f.f16c;
}

void QuantizeFp16Scalar(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToFp16(in[i]);
}
void DequantizeFp16Scalar(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = Fp16ToFloat(in[i]);
}
void QuantizeBf16Scalar(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}
void DequantizeBf16Scalar(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

void QuantizeInt8BlockScalar(const float* in, size_t n, float scale,
                             int8_t* out) {
  if (!(scale > 0.0f)) {  // zero block, or non-finite input (scale NaN)
    std::memset(out, 0, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    float q = std::nearbyint(in[i] / scale);
    q = std::fmin(std::fmax(q, -127.0f), 127.0f);
    out[i] = static_cast<int8_t>(q);
  }
}

void QuantizeInt8Scalar(const float* in, size_t n, size_t block, int8_t* out,
                        float* scales) {
  for (size_t b = 0, start = 0; start < n; ++b, start += block) {
    size_t len = std::min(block, n - start);
    float max_abs = 0.0f;
    bool finite = true;
    for (size_t i = 0; i < len; ++i) {
      float a = std::fabs(in[start + i]);
      finite &= std::isfinite(a);
      max_abs = a > max_abs ? a : max_abs;
    }
    scales[b] = finite ? Int8ScaleFor(max_abs) : NAN;
    QuantizeInt8BlockScalar(in + start, len, scales[b], out + start);
  }
}

void DequantizeInt8Scalar(const int8_t* in, size_t n, size_t block,
                          const float* scales, float* out) {
  for (size_t b = 0, start = 0; start < n; ++b, start += block) {
    size_t len = std::min(block, n - start);
    for (size_t i = 0; i < len; ++i) {
      out[start + i] = static_cast<float>(in[start + i]) * scales[b];
    }
  }
}

}  // namespace internal

void QuantizeFp16(const float* in, size_t n, uint16_t* out) {
  if (internal::UseAvx2Quantize())
    return internal::QuantizeFp16Avx2(in, n, out);
  internal::QuantizeFp16Scalar(in, n, out);
}
void DequantizeFp16(const uint16_t* in, size_t n, float* out) {
  if (internal::UseAvx2Quantize())
    return internal::DequantizeFp16Avx2(in, n, out);
  internal::DequantizeFp16Scalar(in, n, out);
}
void QuantizeBf16(const float* in, size_t n, uint16_t* out) {
  if (internal::UseAvx2Quantize())
    return internal::QuantizeBf16Avx2(in, n, out);
  internal::QuantizeBf16Scalar(in, n, out);
}
void DequantizeBf16(const uint16_t* in, size_t n, float* out) {
  if (internal::UseAvx2Quantize())
    return internal::DequantizeBf16Avx2(in, n, out);
  internal::DequantizeBf16Scalar(in, n, out);
}
void QuantizeInt8(const float* in, size_t n, size_t block, int8_t* out,
                  float* scales) {
  if (internal::UseAvx2Quantize())
    return internal::QuantizeInt8Avx2(in, n, block, out, scales);
  internal::QuantizeInt8Scalar(in, n, block, out, scales);
}
void DequantizeInt8(const int8_t* in, size_t n, size_t block,
                    const float* scales, float* out) {
  if (internal::UseAvx2Quantize())
    return internal::DequantizeInt8Avx2(in, n, block, scales, out);
  internal::DequantizeInt8Scalar(in, n, block, scales, out);
}

void RoundTrip(ValueType type, const float* in, size_t n, size_t int8_block,
               float* out) {
  constexpr size_t kChunk = 1024;
  switch (type) {
    case ValueType::kFp32:
      if (in != out && n > 0) std::memmove(out, in, n * sizeof(float));
      return;
    case ValueType::kFp16:
    case ValueType::kBf16: {
      uint16_t wire[kChunk];
      for (size_t start = 0; start < n; start += kChunk) {
        size_t len = std::min(kChunk, n - start);
        if (type == ValueType::kFp16) {
          QuantizeFp16(in + start, len, wire);
          DequantizeFp16(wire, len, out + start);
        } else {
          QuantizeBf16(in + start, len, wire);
          DequantizeBf16(wire, len, out + start);
        }
      }
      return;
    }
    case ValueType::kInt8: {
      // Whole blocks per chunk so the blocks start at in[0].
      int8_t wire[kChunk];
      float scales[kChunk];
      size_t chunk =
          int8_block >= kChunk ? int8_block : kChunk / int8_block * int8_block;
      for (size_t start = 0; start < n;) {
        size_t len = std::min(chunk, n - start);
        if (len <= kChunk) {
          QuantizeInt8(in + start, len, int8_block, wire, scales);
          DequantizeInt8(wire, len, int8_block, scales, out + start);
          start += len;
        } else {  // a block larger than the stack buffer: one value at a time
          size_t blen = std::min(int8_block, n - start);
          float max_abs = 0.0f;
          bool finite = true;
          for (size_t i = 0; i < blen; ++i) {
            float a = std::fabs(in[start + i]);
            finite &= std::isfinite(a);
            max_abs = a > max_abs ? a : max_abs;
          }
          float scale = finite ? Int8ScaleFor(max_abs) : NAN;
          for (size_t i = 0; i < blen; ++i) {
            int8_t q;
            internal::QuantizeInt8BlockScalar(in + start + i, 1, scale, &q);
            out[start + i] = static_cast<float>(q) * scale;
          }
          start += blen;
        }
      }
      return;
    }
  }
}

}  // namespace ps::kernels
