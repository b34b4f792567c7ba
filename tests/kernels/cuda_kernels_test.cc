// The GPU kernels against the CPU path: bit-identical quantization, the same
// detected indices, the same accumulated sums (exactly, with integer
// values). Every test skips, saying why, when no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/gpu_kernels.h"
#include "kernels/quantize.h"
#include "kernels/sparse_accumulate.h"
#include "kernels/sparse_detect.h"
#include "tests/kernels/gpu_test_support.h"

namespace ps::kernels {
namespace {

using gpu::testing::Download;
using gpu::testing::Scratch;
using gpu::testing::Upload;

// Gradients with the awkward cases in them: zeros, tiny (fp16 subnormal),
// huge (saturating), negative zero, infinities and NaN where allowed.
std::vector<float> Gradients(size_t n, bool with_non_finite, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    switch (rng() % 8) {
      case 0:
        g[i] = 0.0f;
        break;
      case 1:
        g[i] = normal(rng) * 1e-6f;
        break;
      case 2:
        g[i] = normal(rng) * 1e5f;
        break;
      default:
        g[i] = normal(rng);
    }
  }
  if (n > 3) g[3] = -0.0f;
  if (with_non_finite && n > 10) {
    g[5] = std::numeric_limits<float>::infinity();
    g[7] = -std::numeric_limits<float>::infinity();
    g[9] = std::numeric_limits<float>::quiet_NaN();
  }
  return g;
}

const size_t kSizes[] = {0, 1, 7, 63, 64, 65, 1000, 4096 + 3, 300001};

TEST(CudaKernelsTest, Fp16AndBf16MatchTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  for (size_t n : kSizes) {
    const std::vector<float> g = Gradients(n, /*with_non_finite=*/true, 1);
    const gpu::DeviceBuffer in = Upload(g);
    gpu::DeviceBuffer wire = Scratch<uint16_t>(n);
    gpu::DeviceBuffer back = Scratch<float>(n);
    std::vector<uint16_t> cpu_wire(n);
    std::vector<float> cpu_back(n);
    for (bool fp16 : {true, false}) {
      SCOPED_TRACE((fp16 ? "fp16 n=" : "bf16 n=") + std::to_string(n));
      if (fp16) {
        ASSERT_TRUE(
            gpu::QuantizeFp16(in.as<float>(), n, wire.as<uint16_t>()).ok());
        ASSERT_TRUE(
            gpu::DequantizeFp16(wire.as<uint16_t>(), n, back.as<float>()).ok());
        QuantizeFp16(g.data(), n, cpu_wire.data());
        DequantizeFp16(cpu_wire.data(), n, cpu_back.data());
      } else {
        ASSERT_TRUE(
            gpu::QuantizeBf16(in.as<float>(), n, wire.as<uint16_t>()).ok());
        ASSERT_TRUE(
            gpu::DequantizeBf16(wire.as<uint16_t>(), n, back.as<float>()).ok());
        QuantizeBf16(g.data(), n, cpu_wire.data());
        DequantizeBf16(cpu_wire.data(), n, cpu_back.data());
      }
      EXPECT_EQ(Download<uint16_t>(wire, n), cpu_wire);
      const std::vector<float> gpu_back = Download<float>(back, n);
      EXPECT_EQ(
          std::memcmp(gpu_back.data(), cpu_back.data(), n * sizeof(float)), 0);
    }
  }
}

TEST(CudaKernelsTest, Int8MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  for (size_t block : {1u, 32u, 64u, 100u}) {
    for (size_t n : kSizes) {
      SCOPED_TRACE("int8 block=" + std::to_string(block) +
                   " n=" + std::to_string(n));
      const std::vector<float> g = Gradients(n, /*with_non_finite=*/false, 2);
      const size_t blocks = Int8BlockCount(n, block);
      const gpu::DeviceBuffer in = Upload(g);
      gpu::DeviceBuffer wire = Scratch<int8_t>(n);
      gpu::DeviceBuffer scales = Scratch<float>(blocks);
      gpu::DeviceBuffer back = Scratch<float>(n);
      ASSERT_TRUE(gpu::QuantizeInt8(in.as<float>(), n, block, wire.as<int8_t>(),
                                    scales.as<float>())
                      .ok());
      ASSERT_TRUE(gpu::DequantizeInt8(wire.as<int8_t>(), n, block,
                                      scales.as<float>(), back.as<float>())
                      .ok());
      std::vector<int8_t> cpu_wire(n);
      std::vector<float> cpu_scales(blocks), cpu_back(n);
      QuantizeInt8(g.data(), n, block, cpu_wire.data(), cpu_scales.data());
      DequantizeInt8(cpu_wire.data(), n, block, cpu_scales.data(),
                     cpu_back.data());
      EXPECT_EQ(Download<int8_t>(wire, n), cpu_wire);
      EXPECT_EQ(Download<float>(scales, blocks), cpu_scales);
      EXPECT_EQ(Download<float>(back, n), cpu_back);
    }
  }
}

TEST(CudaKernelsTest, ThresholdDetectionGivesTheCpuIndicesInOrder) {
  SKIP_WITHOUT_GPU();
  for (size_t n : kSizes) {
    for (float threshold : {0.0f, 0.5f, 2.0f, 1e30f}) {
      SCOPED_TRACE("n=" + std::to_string(n) +
                   " threshold=" + std::to_string(threshold));
      const std::vector<float> g = Gradients(n, /*with_non_finite=*/true, 3);
      // The CPU detector (kernels/sparse_detect.h) gives the reference.
      std::vector<uint32_t> want_rows;
      ASSERT_TRUE(DetectThreshold(g, threshold, nullptr, &want_rows).ok());
      std::vector<float> want_values;
      for (uint32_t i : want_rows) want_values.push_back(g[i]);
      const gpu::DeviceBuffer in = Upload(g);
      gpu::DeviceBuffer rows = Scratch<uint32_t>(n);
      gpu::DeviceBuffer values = Scratch<float>(n);
      size_t count = 0;
      ASSERT_TRUE(gpu::DetectThreshold(in.as<float>(), n, threshold,
                                       rows.as<uint32_t>(), values.as<float>(),
                                       n, &count)
                      .ok());
      ASSERT_EQ(count, want_rows.size());
      EXPECT_EQ(Download<uint32_t>(rows, count), want_rows);
      const std::vector<float> got_values = Download<float>(values, count);
      EXPECT_EQ(std::memcmp(got_values.data(), want_values.data(),
                            count * sizeof(float)),
                0);
      if (count > 0) {
        size_t too_small = 0;
        EXPECT_TRUE(gpu::DetectThreshold(
                        in.as<float>(), n, threshold, rows.as<uint32_t>(),
                        values.as<float>(), count - 1, &too_small)
                        .Is(StatusCode::kOutOfRange));
        EXPECT_EQ(too_small, count);
      }
    }
  }
}

TEST(CudaKernelsTest, AccumulateEqualsTheCpuSum) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  for (uint32_t dim : {1u, 3u, 16u}) {
    for (size_t count : {0u, 1u, 1000u, 100000u}) {
      SCOPED_TRACE("dim=" + std::to_string(dim) +
                   " count=" + std::to_string(count));
      const uint32_t num_rows = 5000;  // many repeats: atomics collide
      std::vector<uint32_t> rows(count);
      for (uint32_t& r : rows) r = rng() % num_rows;
      // Small integers: every order of additions gives the same float.
      std::vector<float> values(count * dim);
      for (float& v : values)
        v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
      std::vector<float> table(static_cast<size_t>(num_rows) * dim, 1.0f);
      std::vector<float> cpu_table = table;
      ASSERT_TRUE(AccumulateRows(rows, values,
                                 DenseRows{cpu_table.data(), num_rows, dim},
                                 AccumulateMode::kExclusive)
                      .ok());
      const gpu::DeviceBuffer d_rows = Upload(rows);
      const gpu::DeviceBuffer d_values = Upload(values);
      gpu::DeviceBuffer d_table = Upload(table);
      ASSERT_TRUE(gpu::AccumulateRows(d_rows.as<uint32_t>(), count,
                                      d_values.as<float>(), d_table.as<float>(),
                                      num_rows, dim)
                      .ok());
      EXPECT_EQ(Download<float>(d_table, table.size()), cpu_table);
    }
  }
}

TEST(CudaKernelsTest, AccumulateRejectsABadRowAndWritesNothing) {
  SKIP_WITHOUT_GPU();
  const std::vector<uint32_t> rows = {0, 4, 10, 2};
  const std::vector<float> values(rows.size() * 2, 1.0f);
  const std::vector<float> table(10 * 2, 0.0f);
  const gpu::DeviceBuffer d_rows = Upload(rows);
  const gpu::DeviceBuffer d_values = Upload(values);
  gpu::DeviceBuffer d_table = Upload(table);
  const Status s =
      gpu::AccumulateRows(d_rows.as<uint32_t>(), rows.size(),
                          d_values.as<float>(), d_table.as<float>(), 10, 2);
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << s;
  EXPECT_NE(s.message().find("row 10"), std::string::npos) << s;
  EXPECT_EQ(Download<float>(d_table, table.size()), table);
}

}  // namespace
}  // namespace ps::kernels
