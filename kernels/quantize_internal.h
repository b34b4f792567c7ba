// The two implementations behind quantize.h, exposed so tests can compare
// them directly (ActiveCpuFeatures() picks one for the whole process). The Avx2
// functions may only be called when ActiveCpuFeatures() has avx2 and f16c.
// Both give bit-identical results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ps::kernels::internal {

void QuantizeFp16Scalar(const float* in, size_t n, uint16_t* out);
void DequantizeFp16Scalar(const uint16_t* in, size_t n, float* out);
void QuantizeBf16Scalar(const float* in, size_t n, uint16_t* out);
void DequantizeBf16Scalar(const uint16_t* in, size_t n, float* out);
void QuantizeInt8Scalar(const float* in, size_t n, size_t block, int8_t* out,
                        float* scales);
void DequantizeInt8Scalar(const int8_t* in, size_t n, size_t block,
                          const float* scales, float* out);

void QuantizeFp16Avx2(const float* in, size_t n, uint16_t* out);
void DequantizeFp16Avx2(const uint16_t* in, size_t n, float* out);
void QuantizeBf16Avx2(const float* in, size_t n, uint16_t* out);
void DequantizeBf16Avx2(const uint16_t* in, size_t n, float* out);
void QuantizeInt8Avx2(const float* in, size_t n, size_t block, int8_t* out,
                      float* scales);
void DequantizeInt8Avx2(const int8_t* in, size_t n, size_t block,
                        const float* scales, float* out);

// Quantizes one int8 block of `n` values with scale `scale` (scalar; shared
// by both paths for tails so they stay identical).
void QuantizeInt8BlockScalar(const float* in, size_t n, float scale,
                             int8_t* out);

// True when the AVX2/F16C path may run on this CPU and is not switched off.
bool UseAvx2Quantize();

}  // namespace ps::kernels::internal
