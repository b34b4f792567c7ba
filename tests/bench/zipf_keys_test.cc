// ZipfKeys: ranks stay in [1, N], their shares follow the power law, and
// distinct ranks are distinct keys.
#include "bench/zipf_keys.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace ps::bench {
namespace {

// Share of draws with rank <= k against the continuous law's
// ln(k + 1) / ln(N + 1) (S = 1) or ((k + 1)^a - 1) / ((N + 1)^a - 1).
TEST(ZipfKeysTest, RanksFollowThePowerLaw) {
  constexpr uint64_t kN = 1000000, kDraws = 400000;
  for (double s : {0.0, 0.66, 1.0, 1.2}) {
    ZipfKeys z(kN, s);
    std::mt19937_64 rng(7);
    std::vector<uint64_t> below(4, 0);
    const uint64_t ks[] = {1, 100, 10000, kN / 2};
    for (uint64_t i = 0; i < kDraws; ++i) {
      const uint64_t r = z.Rank(rng);
      ASSERT_GE(r, 1u);
      ASSERT_LE(r, kN);
      for (int j = 0; j < 4; ++j) below[j] += r <= ks[j];
    }
    for (int j = 0; j < 4; ++j) {
      const double k = static_cast<double>(ks[j]), n = kN;
      double want;
      if (s == 0) {
        want = k / n;
      } else if (s == 1.0) {
        want = std::log(k + 1) / std::log(n + 1);
      } else {
        const double a = 1 - s;
        want = (std::pow(k + 1, a) - 1) / (std::pow(n + 1, a) - 1);
      }
      EXPECT_NEAR(static_cast<double>(below[j]) / kDraws, want, 0.01)
          << "s " << s << ", rank <= " << ks[j];
    }
  }
}

TEST(ZipfKeysTest, DistinctRanksAreDistinctKeys) {
  std::set<uint64_t> keys;
  for (uint64_t r = 1; r <= 100000; ++r) keys.insert(ZipfKeys::KeyOf(r));
  EXPECT_EQ(keys.size(), 100000u);
}

}  // namespace
}  // namespace ps::bench
