// Threshold and top-k detection against plain reference implementations, on
// many sizes and shapes, with and without a thread pool, and the AVX2
// scanners against the scalar ones. ctest also runs this binary with
// PS_KERNELS_SCALAR=1 so the public functions take the scalar path.
#include "kernels/sparse_detect.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/sparse_detect_internal.h"

namespace ps::kernels {
namespace {

// Edge sizes around the 8-lane groups, the 32-entry loop and the 4096-entry
// blocks of the scanners (sparse_detect_internal.h), and one that the pool
// splits.
const size_t kSizes[] = {
    0, 1, 7, 8, 31, 32, 33, 100, 1000, 4095, 4096, 4097, (1u << 17) + 3};

// Floats as bits, so NaN payloads and signed zeros compare exactly.
std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

float Mag(float v) { return std::isnan(v) ? 0.0f : std::fabs(v); }

std::vector<uint32_t> RefThreshold(const std::vector<float>& g, float eps) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < g.size(); ++i)
    if (std::fabs(g[i]) >= eps) out.push_back(static_cast<uint32_t>(i));
  return out;
}

// Indices by |g| descending, ties by index ascending: the top-k order.
std::vector<uint32_t> RankOrder(const std::vector<float>& g) {
  std::vector<uint32_t> idx(g.size());
  for (size_t i = 0; i < g.size(); ++i) idx[i] = static_cast<uint32_t>(i);
  std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
    if (Mag(g[a]) != Mag(g[b])) return Mag(g[a]) > Mag(g[b]);
    return a < b;
  });
  return idx;
}

std::vector<uint32_t> RefTopKFromOrder(const std::vector<uint32_t>& order,
                                       size_t k) {
  std::vector<uint32_t> idx(order.begin(),
                            order.begin() + std::min(k, order.size()));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<uint32_t> RefTopK(const std::vector<float>& g, size_t k) {
  return RefTopKFromOrder(RankOrder(g), k);
}

enum class Shape {
  kRandom,
  kZeros,
  kAllAbove,
  kFewValues,
  kWithNaN,
  kSpecials,  // NaN of both signs, +-inf, denormals, +-0, +-FLT_MAX
};

std::vector<float> Make(size_t n, Shape shape, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    switch (shape) {
      case Shape::kRandom:
        g[i] = normal(rng);
        break;
      case Shape::kZeros:
        g[i] = (i % 2) ? 0.0f : -0.0f;
        break;
      case Shape::kAllAbove:
        g[i] = 5.0f + std::fabs(normal(rng));
        break;
      case Shape::kFewValues:
        g[i] = 0.5f * small(rng);
        break;  // many ties
      case Shape::kWithNaN:
        g[i] = (i % 11 == 3) ? NAN : (i % 13 == 5) ? INFINITY : normal(rng);
        break;
      case Shape::kSpecials: {
        const float specials[] = {NAN,
                                  -NAN,
                                  INFINITY,
                                  -INFINITY,
                                  std::numeric_limits<float>::denorm_min(),
                                  -std::numeric_limits<float>::denorm_min(),
                                  std::numeric_limits<float>::min() / 4,
                                  0.0f,
                                  -0.0f,
                                  std::numeric_limits<float>::max(),
                                  -std::numeric_limits<float>::max()};
        const size_t pick = rng() % 16;
        g[i] = pick < std::size(specials) ? specials[pick] : normal(rng);
        break;
      }
    }
  }
  return g;
}

const Shape kShapes[] = {Shape::kRandom,    Shape::kZeros,   Shape::kAllAbove,
                         Shape::kFewValues, Shape::kWithNaN, Shape::kSpecials};

// Thresholds: every entry, typical ones, the smallest denormal (what
// ErrorFeedback::Flush uses), the smallest normal, and infinity.
const float kEpsilons[] = {0.0f,
                           0.5f,
                           1.0f,
                           2.5f,
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min(),
                           INFINITY};

TEST(SparseDetectTest, ThresholdMatchesReference) {
  std::mt19937 rng(1);
  ThreadPool pool(3);
  for (size_t n : kSizes) {
    for (Shape shape : kShapes) {
      std::vector<float> g = Make(n, shape, rng);
      for (float eps : kEpsilons) {
        std::vector<uint32_t> want = RefThreshold(g, eps), got, got_pool;
        ASSERT_TRUE(DetectThreshold(g, eps, nullptr, &got).ok());
        ASSERT_TRUE(DetectThreshold(g, eps, &pool, &got_pool).ok());
        ASSERT_EQ(got, want) << "n=" << n << " eps=" << eps;
        ASSERT_EQ(got_pool, want) << "n=" << n << " eps=" << eps;
        // With values: the same indices, and g at each, bit for bit.
        std::vector<float> want_values;
        for (uint32_t i : want) want_values.push_back(g[i]);
        std::vector<float> values = {1.0f}, values_pool;
        ASSERT_TRUE(DetectThreshold(g, eps, nullptr, &got, &values).ok());
        ASSERT_TRUE(
            DetectThreshold(g, eps, &pool, &got_pool, &values_pool).ok());
        ASSERT_EQ(got, want) << "n=" << n << " eps=" << eps;
        ASSERT_EQ(got_pool, want) << "n=" << n << " eps=" << eps;
        ASSERT_EQ(Bits(values), Bits(want_values)) << "n=" << n;
        ASSERT_EQ(Bits(values_pool), Bits(want_values)) << "n=" << n;
      }
    }
  }
}

TEST(SparseDetectTest, TopKMatchesReferenceWithTieBreak) {
  std::mt19937 rng(2);
  ThreadPool pool(3);
  for (size_t n : kSizes) {
    for (Shape shape : kShapes) {
      std::vector<float> g = Make(n, shape, rng);
      const std::vector<uint32_t> order = RankOrder(g);
      for (size_t k : {size_t{0}, size_t{1}, size_t{5}, n / 3, n / 100,
                       n - (n > 0), n, n + 10}) {
        std::vector<uint32_t> want = RefTopKFromOrder(order, k), got, got_pool;
        ASSERT_TRUE(DetectTopK(g, k, nullptr, &got).ok());
        ASSERT_TRUE(DetectTopK(g, k, &pool, &got_pool).ok());
        ASSERT_EQ(got, want)
            << "n=" << n << " k=" << k << " shape " << static_cast<int>(shape);
        ASSERT_EQ(got_pool, want) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(SparseDetectTest, TopKTieBreakPrefersLargerThenLowerIndex) {
  std::vector<float> g = {1, -3, 2, 3, -2, 3, 0, 2};
  std::vector<uint32_t> got;
  ASSERT_TRUE(DetectTopK(g, 1, nullptr, &got).ok());
  EXPECT_EQ(got, (std::vector<uint32_t>{1}));  // |-3| at 1 beats 3 at 3, 5
  ASSERT_TRUE(DetectTopK(g, 4, nullptr, &got).ok());
  EXPECT_EQ(got, (std::vector<uint32_t>{1, 2, 3, 5}));  // then 2 at 2 first
  ASSERT_TRUE(DetectTopK(g, 5, nullptr, &got).ok());
  EXPECT_EQ(got, (std::vector<uint32_t>{1, 2, 3, 4, 5}));
}

TEST(SparseDetectTest, Avx2ScannersMatchScalar) {
  if (!DetectCpuFeatures().avx2) GTEST_SKIP() << "CPU has no AVX2";
  std::mt19937 rng(3);
  for (size_t n : kSizes) {
    for (Shape shape : kShapes) {
      std::vector<float> g = Make(n, shape, rng);
      for (size_t begin : {size_t{0}, std::min<size_t>(n, 5)}) {
        for (float eps : kEpsilons) {
          std::vector<uint32_t> a, b;
          internal::ThresholdScan(false, g.data(), begin, n, eps, &a);
          internal::ThresholdScan(true, g.data(), begin, n, eps, &b);
          ASSERT_EQ(a, b) << n;
        }
        // The block scanners themselves, indices and values, on one block
        // (the callers keep blocks <= kScanBlock).
        const size_t end = std::min(n, begin + internal::kScanBlock);
        const size_t room = end - begin + internal::kScanSlack;
        for (uint32_t key : {0u, 1u, 0x3f000000u, 0x7f800000u}) {
          std::vector<uint32_t> ia(room), ib(room);
          std::vector<float> va(room), vb(room);
          size_t na = internal::ScanGeKeyScalar(g.data(), begin, end, key,
                                                ia.data(), va.data());
          size_t nb = internal::ScanGeKeyAvx2(g.data(), begin, end, key,
                                              ib.data(), vb.data());
          ASSERT_EQ(na, nb);
          ia.resize(na), ib.resize(nb), va.resize(na), vb.resize(nb);
          ASSERT_EQ(ia, ib);
          ASSERT_EQ(Bits(va), Bits(vb));
        }
      }
    }
  }
}

TEST(SparseDetectTest, RowsByNorm) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  for (size_t dim : {1u, 3u, 8u, 13u, 64u}) {
    for (size_t rows : {0u, 1u, 9u, 5000u}) {
      std::vector<float> g = Make(rows * dim, Shape::kRandom, rng);
      // Reference norms in double.
      std::vector<double> l2(rows), maxabs(rows);
      for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < dim; ++j) {
          double v = g[r * dim + j];
          l2[r] += v * v;
          maxabs[r] = std::max(maxabs[r], std::fabs(v));
        }
        l2[r] = std::sqrt(l2[r]);
      }
      std::vector<float> norms;
      ASSERT_TRUE(ComputeRowNorms(g, dim, RowNorm::kL2, &pool, &norms).ok());
      for (size_t r = 0; r < rows; ++r)
        ASSERT_NEAR(norms[r], l2[r], 1e-5 * l2[r]);
      const float eps = std::sqrt(static_cast<float>(dim));
      std::vector<uint32_t> got;
      ASSERT_TRUE(
          DetectRowsThreshold(g, dim, RowNorm::kL2, eps, &pool, &got).ok());
      std::vector<bool> in(rows);
      for (uint32_t r : got) in[r] = true;
      for (size_t r = 0; r < rows; ++r) {
        if (l2[r] >= eps * (1 + 1e-5)) {
          ASSERT_TRUE(in[r]) << r;
        }
        if (l2[r] < eps * (1 - 1e-5)) {
          ASSERT_FALSE(in[r]) << r;
        }
      }
      ASSERT_TRUE(
          DetectRowsThreshold(g, dim, RowNorm::kMaxAbs, 2.0f, nullptr, &got)
              .ok());
      std::vector<uint32_t> want;
      for (size_t r = 0; r < rows; ++r)
        if (maxabs[r] >= 2.0) want.push_back(static_cast<uint32_t>(r));
      ASSERT_EQ(got, want);
      // Top-k rows: by the norms, ties to the lower row.
      for (size_t k : {size_t{1}, rows / 10, rows}) {
        std::vector<float> max_norms(maxabs.begin(), maxabs.end());
        ASSERT_TRUE(
            DetectRowsTopK(g, dim, RowNorm::kMaxAbs, k, &pool, &got).ok());
        ASSERT_EQ(got, RefTopK(max_norms, k));
        ASSERT_TRUE(
            DetectRowsTopK(g, dim, RowNorm::kL2, k, nullptr, &got).ok());
        ASSERT_EQ(got, RefTopK(norms, k));
      }
    }
  }
  std::vector<uint32_t> got;
  std::vector<float> g(10);
  EXPECT_TRUE(DetectRowsThreshold(g, 3, RowNorm::kL2, 1.0f, nullptr, &got)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(DetectRowsTopK(g, 0, RowNorm::kL2, 1, nullptr, &got)
                  .Is(StatusCode::kInvalidArgument));
}

TEST(SparseDetectTest, RejectsBadArgumentsAndTooLargeInputs) {
  std::vector<float> g(4, 1.0f);
  std::vector<uint32_t> out = {7};
  EXPECT_TRUE(DetectThreshold(g, -1.0f, nullptr, &out)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(
      DetectThreshold(g, NAN, nullptr, &out).Is(StatusCode::kInvalidArgument));
  // A span one past 2^32 entries: rejected before any entry is read.
  std::span<const float> huge(g.data(), (size_t{1} << 32) + 1);
  Status s = DetectThreshold(huge, 1.0f, nullptr, &out);
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << s;
  EXPECT_NE(s.message().find("2^32"), std::string::npos);
  EXPECT_TRUE(DetectTopK(huge, 3, nullptr, &out).Is(StatusCode::kOutOfRange));
}

}  // namespace
}  // namespace ps::kernels
