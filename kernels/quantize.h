// Quantization of fp32 gradient values to the narrower wire types of a sparse
// packet (fp16, bf16, int8 with one scale per block) and back.
//
// Rounding and error bounds (v: the fp32 input, d: the value after a round
// trip quantize -> dequantize):
//  - fp16: IEEE binary16, round to nearest even. For |v| in the normal fp16
//    range [2^-14, 65504], |d - v| <= 2^-11 * |v|. Below 2^-14 (subnormals)
//    the error is at most 2^-25 absolute. Values beyond +-65504 SATURATE to
//    +-65504 (not infinity), so a large gradient is clipped rather than
//    poisoning a table; error feedback keeps the clipped remainder.
//  - bf16: the top 16 bits of fp32, round to nearest even:
//    |d - v| <= 2^-8 * |v| for normal v. Values that would round past the
//    largest finite bf16 saturate to it.
//  - int8: per block of `block` consecutive values, scale = max|v| / 127 and
//    q = round_half_even(v / scale) (a true division) in [-127, 127],
//    d = q * scale. Then
//    |d - v| <= max|block| / 254 (half a step), up to fp32 rounding of the
//    scale and the product (a few ulps of max|block|). A block of zeros has
//    scale 0. The scale is chosen so that quantizing d again gives the same
//    bytes and scales (idempotent), and v - d is exact in fp32 (q >= 1
//    implies v > (q - 1/2) * scale, so v and d are within a factor of 2):
//    error feedback relies on both.
// NaN stays NaN for fp16/bf16; int8 inputs must be finite (a block containing
// a non-finite value gets scale NaN, which the packet decoder rejects).
//
// Each array function dispatches once per call on ActiveCpuFeatures() to an
// AVX2/F16C path or the scalar one; both give bit-identical results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ps::kernels {

// The wire type of gradient values. The numbers are part of the packet
// format: never renumber.
enum class ValueType : uint8_t {
  kFp32 = 0,
  kFp16 = 1,
  kBf16 = 2,
  kInt8 = 3,
};

// "fp32", "fp16", "bf16", "int8", or "unknown".
std::string_view ValueTypeName(ValueType type);
// Bytes per value on the wire (int8: 1; scales are counted separately).
size_t ValueTypeBytes(ValueType type);
// True for the four types above.
bool IsValidValueType(uint8_t raw);

// The default number of values sharing one int8 scale.
inline constexpr uint32_t kDefaultInt8Block = 64;

// Number of int8 blocks (and scales) for n values.
inline size_t Int8BlockCount(size_t n, size_t block) {
  return block == 0 ? 0 : (n + block - 1) / block;
}

// Single values (scalar, exact reference semantics of the array forms).
uint16_t FloatToFp16(float v);  // saturating, round to nearest even
float Fp16ToFloat(uint16_t h);
uint16_t FloatToBf16(float v);  // saturating, round to nearest even
float Bf16ToFloat(uint16_t b);

// Array forms; `in` and `out` must not overlap.
void QuantizeFp16(const float* in, size_t n, uint16_t* out);
void DequantizeFp16(const uint16_t* in, size_t n, float* out);
void QuantizeBf16(const float* in, size_t n, uint16_t* out);
void DequantizeBf16(const uint16_t* in, size_t n, float* out);

// int8: `scales` holds Int8BlockCount(n, block) floats; block >= 1.
void QuantizeInt8(const float* in, size_t n, size_t block, int8_t* out,
                  float* scales);
void DequantizeInt8(const int8_t* in, size_t n, size_t block,
                    const float* scales, float* out);

// The scale QuantizeInt8 uses for a block whose largest magnitude is
// `max_abs` (exposed for tests and for callers that quantize row by row).
float Int8ScaleFor(float max_abs);

// Quantizes then dequantizes `n` values in place of `out`, as the receiver
// will see them: out[i] = Dequantize(Quantize(in[i])). fp32 copies. For int8
// the blocks start at in[0]. `in` and `out` may be the same array.
void RoundTrip(ValueType type, const float* in, size_t n, size_t int8_block,
               float* out);

}  // namespace ps::kernels
