// Quantization against plain reference semantics (nearest representable
// value, ties to even, saturation), within the error bounds quantize.h
// states, and the AVX2 path bit-identical to the scalar one.
#include "kernels/quantize.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/quantize_internal.h"

namespace ps::kernels {
namespace {

// memcmp that accepts the null data() of empty vectors.
int MemCmp(const void* a, const void* b, size_t n) {
  return n == 0 ? 0 : std::memcmp(a, b, n);
}

const size_t kSizes[] = {0,  1,  2,  7,  8,   9,    15,  16,
                         17, 63, 64, 65, 127, 1000, 4099};

bool HaveAvx2() {
  CpuFeatures f = DetectCpuFeatures();
  return f.avx2 && f.f16c;
}

// Random floats over many magnitudes, with specials sprinkled in.
std::vector<float> RandomFloats(size_t n, std::mt19937& rng, bool specials) {
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-30, 20);
  std::uniform_int_distribution<int> pick(0, 40);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = std::ldexp(mant(rng), exp(rng));
    if (specials) {
      switch (pick(rng)) {
        case 0:
          x = 0.0f;
          break;
        case 1:
          x = -0.0f;
          break;
        case 2:
          x = 65504.0f;
          break;
        case 3:
          x = 70000.0f;
          break;
        case 4:
          x = -1e30f;
          break;
        case 5:
          x = std::numeric_limits<float>::infinity();
          break;
        case 6:
          x = std::numeric_limits<float>::quiet_NaN();
          break;
        case 7:
          x = std::numeric_limits<float>::denorm_min();
          break;
        case 8:
          x = std::numeric_limits<float>::max();
          break;
        case 9:
          x = 0x1p-25f;
          break;  // fp16 tie between 0 and min subnormal
        default:
          break;
      }
    }
  }
  return v;
}

// Reference: the fp16 value nearest to v, ties to the even encoding,
// saturating at +-65504; checked by comparing against both neighbours.
void ExpectNearestFp16(float v, uint16_t h) {
  if (std::isnan(v)) {
    EXPECT_TRUE(std::isnan(Fp16ToFloat(h)));
    return;
  }
  double target = std::fmin(std::fmax(double{v}, -65504.0), 65504.0);
  double got = Fp16ToFloat(h);
  ASSERT_FALSE(std::isinf(got)) << v;
  for (int step : {-1, 1}) {
    uint16_t nb = static_cast<uint16_t>(h + step);
    if ((nb & 0x7c00) == 0x7c00 || (nb & 0x7fff) == 0x7fff) continue;
    if (((nb ^ h) & 0x8000) != 0) continue;  // crossed the sign
    double other = Fp16ToFloat(nb);
    double dg = std::fabs(got - target), dother = std::fabs(other - target);
    ASSERT_LE(dg, dother) << "v=" << v << " h=" << h;
    if (dg == dother && target != 0) {
      ASSERT_EQ(h & 1, 0) << "tie not even, v=" << v;
    }
  }
}

TEST(QuantizeTest, Fp16EveryEncodingRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf/NaN: saturated by design
    ASSERT_EQ(FloatToFp16(Fp16ToFloat(static_cast<uint16_t>(h))), h);
  }
  EXPECT_TRUE(std::isnan(Fp16ToFloat(0x7e00)));
  EXPECT_TRUE(std::isinf(Fp16ToFloat(0x7c00)));
}

TEST(QuantizeTest, Fp16IsNearestEvenSaturatingAndWithinBound) {
  std::mt19937 rng(1);
  for (float v : RandomFloats(200000, rng, true)) {
    uint16_t h = FloatToFp16(v);
    ExpectNearestFp16(v, h);
    float a = std::fabs(v);
    if (a >= 0x1p-14f && a <= 65504.0f) {
      ASSERT_LE(std::fabs(Fp16ToFloat(h) - v), 0x1p-11f * a) << v;
    } else if (a < 0x1p-14f) {
      ASSERT_LE(std::fabs(Fp16ToFloat(h) - v), 0x1p-25f) << v;
    } else if (!std::isnan(v)) {
      ASSERT_EQ(std::fabs(Fp16ToFloat(h)), 65504.0f) << v;
    }
  }
}

TEST(QuantizeTest, Bf16IsNearestEvenSaturatingAndWithinBound) {
  std::mt19937 rng(2);
  for (float v : RandomFloats(200000, rng, true)) {
    uint16_t b = FloatToBf16(v);
    float d = Bf16ToFloat(b);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(d));
      continue;
    }
    ASSERT_FALSE(std::isinf(d)) << v;
    // Reference: truncate and compare with the next encoding up.
    uint32_t bits = std::bit_cast<uint32_t>(v);
    uint32_t abs = bits & 0x7fffffff;
    if (abs >= 0x7f7f0000) {
      ASSERT_EQ(b & 0x7fff, 0x7f7f) << v;
      continue;
    }
    float down = std::bit_cast<float>(bits & 0xffff0000);
    float up = std::bit_cast<float>((bits & 0xffff0000) + 0x10000);
    double dd = std::fabs(double{down} - v), du = std::fabs(double{up} - v);
    float want = dd < du   ? down
                 : du < dd ? up
                           : (((bits >> 16) & 1) ? up : down);
    ASSERT_EQ(std::bit_cast<uint32_t>(d), std::bit_cast<uint32_t>(want)) << v;
    if (std::isnormal(v)) {
      ASSERT_LE(std::fabs(d - v), 0x1p-8f * std::fabs(v));
    }
  }
}

TEST(QuantizeTest, Int8WithinBoundZeroBlocksAndIdempotent) {
  std::mt19937 rng(3);
  for (size_t block : {1u, 7u, 8u, 64u, 1000u}) {
    for (size_t n : kSizes) {
      std::vector<float> in = RandomFloats(n, rng, false);
      if (n > 20) std::fill(in.begin(), in.begin() + 20, 0.0f);  // a zero block
      std::vector<int8_t> q(n), q2(n);
      std::vector<float> scales(Int8BlockCount(n, block)),
          scales2(scales.size());
      std::vector<float> d(n);
      QuantizeInt8(in.data(), n, block, q.data(), scales.data());
      DequantizeInt8(q.data(), n, block, scales.data(), d.data());
      for (size_t b = 0; b * block < n; ++b) {
        float max_abs = 0;
        for (size_t i = b * block; i < std::min(n, (b + 1) * block); ++i)
          max_abs = std::fmax(max_abs, std::fabs(in[i]));
        if (max_abs == 0) {
          ASSERT_EQ(scales[b], 0.0f);
        }
        // Half a step, plus a few ulps of the block maximum for rounding.
        float bound = max_abs / 254.0f * (1.0f + 0x1p-18f);
        for (size_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
          ASSERT_GE(q[i], -127);
          ASSERT_LE(std::fabs(d[i] - in[i]), bound)
              << "block " << block << " n " << n << " i " << i;
        }
      }
      // Quantizing the dequantized values gives the same bytes and scales.
      QuantizeInt8(d.data(), n, block, q2.data(), scales2.data());
      ASSERT_EQ(q, q2);
      ASSERT_EQ(0, MemCmp(scales.data(), scales2.data(), 4 * scales.size()));
    }
  }
}

TEST(QuantizeTest, Int8ScaleIsAFixedPoint) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-100, 100);
  for (int i = 0; i < 200000; ++i) {
    float m = std::ldexp(mant(rng), exp(rng));
    float s = Int8ScaleFor(m);
    ASSERT_GE(127.0f * s, m * (1 - 0x1p-22f));
    ASSERT_EQ(Int8ScaleFor(127.0f * s), s) << m;
  }
  EXPECT_EQ(Int8ScaleFor(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(Int8ScaleFor(INFINITY)));
}

TEST(QuantizeTest, Avx2MatchesScalarBitForBit) {
  if (!HaveAvx2()) GTEST_SKIP() << "CPU has no AVX2/F16C";
  std::mt19937 rng(5);
  for (size_t n : kSizes) {
    std::vector<float> in = RandomFloats(n, rng, true);
    std::vector<uint16_t> a(n), b(n);
    internal::QuantizeFp16Scalar(in.data(), n, a.data());
    internal::QuantizeFp16Avx2(in.data(), n, b.data());
    ASSERT_EQ(a, b) << "fp16 n=" << n;
    std::vector<float> fa(n), fb(n);
    internal::DequantizeFp16Scalar(a.data(), n, fa.data());
    internal::DequantizeFp16Avx2(a.data(), n, fb.data());
    ASSERT_EQ(0, MemCmp(fa.data(), fb.data(), 4 * n)) << "fp16 deq n=" << n;

    internal::QuantizeBf16Scalar(in.data(), n, a.data());
    internal::QuantizeBf16Avx2(in.data(), n, b.data());
    ASSERT_EQ(a, b) << "bf16 n=" << n;
    internal::DequantizeBf16Scalar(a.data(), n, fa.data());
    internal::DequantizeBf16Avx2(a.data(), n, fb.data());
    ASSERT_EQ(0, MemCmp(fa.data(), fb.data(), 4 * n)) << "bf16 deq n=" << n;

    for (size_t block : {1u, 9u, 64u}) {
      std::vector<float> finite = RandomFloats(n, rng, false);
      if (n > 3)
        finite[n / 2] = (n % 2) ? INFINITY : NAN;  // one poisoned block
      size_t blocks = Int8BlockCount(n, block);
      std::vector<int8_t> qa(n), qb(n);
      std::vector<float> sa(blocks), sb(blocks);
      internal::QuantizeInt8Scalar(finite.data(), n, block, qa.data(),
                                   sa.data());
      internal::QuantizeInt8Avx2(finite.data(), n, block, qb.data(), sb.data());
      ASSERT_EQ(qa, qb) << "int8 n=" << n << " block " << block;
      ASSERT_EQ(0, MemCmp(sa.data(), sb.data(), 4 * blocks));
      internal::DequantizeInt8Scalar(qa.data(), n, block, sa.data(), fa.data());
      internal::DequantizeInt8Avx2(qa.data(), n, block, sa.data(), fb.data());
      ASSERT_EQ(0, MemCmp(fa.data(), fb.data(), 4 * n));
    }
  }
}

TEST(QuantizeTest, RoundTripMatchesQuantizeThenDequantize) {
  std::mt19937 rng(6);
  for (size_t n : kSizes) {
    std::vector<float> in = RandomFloats(n, rng, false), out(n), want(n);
    RoundTrip(ValueType::kFp32, in.data(), n, 0, out.data());
    ASSERT_EQ(0, MemCmp(in.data(), out.data(), 4 * n));
    std::vector<uint16_t> h(n);
    QuantizeFp16(in.data(), n, h.data());
    DequantizeFp16(h.data(), n, want.data());
    RoundTrip(ValueType::kFp16, in.data(), n, 0, out.data());
    ASSERT_EQ(0, MemCmp(want.data(), out.data(), 4 * n));
    QuantizeBf16(in.data(), n, h.data());
    DequantizeBf16(h.data(), n, want.data());
    RoundTrip(ValueType::kBf16, in.data(), n, 0, out.data());
    ASSERT_EQ(0, MemCmp(want.data(), out.data(), 4 * n));
    for (size_t block : {3u, 64u, 2000u}) {
      std::vector<int8_t> q(n);
      std::vector<float> s(Int8BlockCount(n, block));
      QuantizeInt8(in.data(), n, block, q.data(), s.data());
      DequantizeInt8(q.data(), n, block, s.data(), want.data());
      std::vector<float> inplace = in;
      RoundTrip(ValueType::kInt8, inplace.data(), n, block, inplace.data());
      ASSERT_EQ(0, MemCmp(want.data(), inplace.data(), 4 * n))
          << n << " " << block;
    }
  }
}

}  // namespace
}  // namespace ps::kernels
