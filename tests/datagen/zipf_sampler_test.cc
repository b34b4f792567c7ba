// ZipfSampler against the exact bounded Zipf law: its rank frequencies over
// 10^6 draws pass a chi-square test (at a level of about 1e-6, so a correct
// sampler never fails for these fixed seeds and a biased one does), ranks
// stay in [0, n), and the edge cases (one value, exponent 0 and exactly 1,
// steep exponents) behave.
#include "worker/datagen/zipf_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace ps::datagen {
namespace {

constexpr int kDraws = 1000000;

ZipfSampler Make(uint64_t n, double exponent) {
  StatusOr<ZipfSampler> sampler = ZipfSampler::Create(n, exponent);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *sampler;
}

// The exact probabilities of ranks 0..n-1, summed in long double.
std::vector<double> ExactPmf(uint64_t n, double exponent) {
  std::vector<double> p(n);
  long double total = 0;
  for (uint64_t r = 0; r < n; ++r) {
    p[r] = std::pow(static_cast<double>(r + 1), -exponent);
    total += p[r];
  }
  for (double& x : p) x = static_cast<double>(x / total);
  return p;
}

// The chi-square quantile for `dof` degrees of freedom that a statistic
// exceeds with probability about 1e-6 (Wilson-Hilferty, z = 4.75).
double ChiSquareBound(int dof) {
  double k = dof, z = 4.75;
  double c = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * c * c * c;
}

// Bins: ranks 0..head-1 one each, then [head, n/2) and [n/2, n) (when not
// empty). Returns the chi-square statistic of kDraws draws; *dof its degrees.
double ChiSquare(uint64_t n, double exponent, uint64_t head, uint64_t seed,
                 int* dof) {
  std::vector<double> pmf = ExactPmf(n, exponent);
  head = std::min(head, n);
  const uint64_t half = std::max(head, n / 2);
  std::vector<double> expected(head + 2, 0);
  auto bin = [&](uint64_t r) {
    return r < head ? r : (r < half ? head : head + 1);
  };
  for (uint64_t r = 0; r < n; ++r) expected[bin(r)] += pmf[r] * kDraws;
  std::vector<double> seen(expected.size(), 0);
  ZipfSampler sampler = Make(n, exponent);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < kDraws; ++i) {
    uint64_t r = sampler.Sample(rng);
    EXPECT_LT(r, n);
    if (r >= n) return std::numeric_limits<double>::infinity();
    seen[bin(r)] += 1;
  }
  double chi = 0;
  *dof = -1;
  for (size_t b = 0; b < expected.size(); ++b) {
    if (expected[b] == 0) {
      EXPECT_EQ(seen[b], 0) << "bin " << b;
      continue;
    }
    chi += (seen[b] - expected[b]) * (seen[b] - expected[b]) / expected[b];
    ++*dof;
  }
  return chi;
}

TEST(ZipfSamplerTest, RejectsBadArguments) {
  EXPECT_FALSE(ZipfSampler::Create(0, 1).ok());
  EXPECT_FALSE(ZipfSampler::Create(ZipfSampler::kMaxValues + 1, 1).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, -0.5).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, 65).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, std::nan("")).ok());
  EXPECT_FALSE(
      ZipfSampler::Create(10, std::numeric_limits<double>::infinity()).ok());
  EXPECT_TRUE(ZipfSampler::Create(ZipfSampler::kMaxValues, 1).ok());
}

TEST(ZipfSamplerTest, SameSeedSameRanks) {
  ZipfSampler sampler = Make(10000000, 0.9);
  std::mt19937_64 a(42), b(42), c(43);
  int differ = 0;
  for (int i = 0; i < 10000; ++i) {
    uint64_t x = sampler.Sample(a);
    ASSERT_EQ(x, sampler.Sample(b)) << "draw " << i;
    differ += x != sampler.Sample(c);
  }
  EXPECT_GT(differ, 5000);  // another seed, other ranks
}

TEST(ZipfSamplerTest, OneValueIsAlwaysRankZero) {
  ZipfSampler sampler = Make(1, 1.3);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(sampler.Sample(rng), 0u);
}

TEST(ZipfSamplerTest, RanksStayInRange) {
  for (uint64_t n : {2ull, 3ull, 7ull, 1000ull, 1ull << 40}) {
    for (double s : {0.0, 0.3, 1.0, 1.7, 10.0, 64.0}) {
      ZipfSampler sampler = Make(n, s);
      std::mt19937_64 rng(n * 31 + static_cast<uint64_t>(s * 10));
      uint64_t top = 0;
      for (int i = 0; i < 100000; ++i) {
        uint64_t r = sampler.Sample(rng);
        ASSERT_LT(r, n) << "n " << n << " exponent " << s;
        top = std::max(top, r);
      }
      // The uniform law over a few values reaches the last one.
      if (s == 0 && n <= 1000) {
        EXPECT_EQ(top, n - 1);
      }
    }
  }
}

// Every rank of a small law, for the exponents ps_datagen uses and the
// edge cases: exponent 0 (uniform) and exactly 1 (where H is a logarithm).
TEST(ZipfSamplerTest, SmallLawMatchesTheExactPmf) {
  uint64_t seed = 1;
  for (double s : {0.0, 0.5, 0.66, 1.0, 1.1, 2.0, 4.0}) {
    int dof = 0;
    double chi = ChiSquare(50, s, 50, seed++, &dof);
    EXPECT_LT(chi, ChiSquareBound(dof))
        << "exponent " << s << ", " << dof << " degrees of freedom";
  }
}

// The head ranks one by one and the mass of each half of the tail, on the
// sizes of Criteo's biggest fields.
TEST(ZipfSamplerTest, LargeLawMatchesTheExactPmf) {
  uint64_t seed = 100;
  for (double s : {0.66, 1.0, 1.1}) {
    int dof = 0;
    double chi = ChiSquare(10131227, s, 30, seed++, &dof);
    EXPECT_LT(chi, ChiSquareBound(dof)) << "exponent " << s;
  }
}

// The test has power: a law off by a little in its exponent fails it.
TEST(ZipfSamplerTest, ChiSquareSeesAWrongExponent) {
  std::vector<double> pmf = ExactPmf(50, 1.0);
  ZipfSampler wrong = Make(50, 1.03);
  std::mt19937_64 rng(7);
  std::vector<double> seen(50, 0);
  for (int i = 0; i < kDraws; ++i) seen[wrong.Sample(rng)] += 1;
  double chi = 0;
  for (int r = 0; r < 50; ++r) {
    double e = pmf[r] * kDraws;
    chi += (seen[r] - e) * (seen[r] - e) / e;
  }
  EXPECT_GT(chi, ChiSquareBound(49));
}

}  // namespace
}  // namespace ps::datagen
