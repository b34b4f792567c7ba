// ZipfKeys: keys for skewed benchmarks (ps_bench --mode=train
// --key_space=N --zipf=S): id r in [1, N] drawn with weight about r^-S, as
// the values of a click log's large fields are (exponents 0.66 to 1.0 in
// the Criteo log), and spread over the 64-bit key space by a bijective mix
// so that the hot ids fall on every shard and partition.
//
// The draw inverts the continuous power law's CDF, O(1) time and memory
// for any N (a table of N weights would take 8N bytes): exact in the tail,
// and the head's share a little smaller than the discrete law's (rank 1
// gets ln 2 / ln N of the draws at S = 1, not 1 / H_N). S = 0 is uniform.
//
// A value type; not thread-safe (the caller's generator).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace ps::bench {

class ZipfKeys {
 public:
  // n >= 1, s >= 0 (checked by the caller).
  ZipfKeys(uint64_t n, double s) : n_(n), s_(s) {}

  // A rank in [1, n].
  uint64_t Rank(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const double n = static_cast<double>(n_);
    double r;
    if (s_ == 0) {
      r = 1 + u * n;
    } else if (std::abs(s_ - 1) < 1e-9) {
      r = std::exp(u * std::log(n + 1));
    } else {
      const double a = 1 - s_;
      r = std::pow(u * (std::pow(n + 1, a) - 1) + 1, 1 / a);
    }
    const uint64_t rank = static_cast<uint64_t>(r);
    return rank < 1 ? 1 : rank > n_ ? n_ : rank;
  }
  // The key of rank r: a bijection of the 64-bit integers (SplitMix64's
  // finalizer), so distinct ranks are distinct keys.
  static uint64_t KeyOf(uint64_t rank) {
    uint64_t z = rank + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t Key(std::mt19937_64& rng) const { return KeyOf(Rank(rng)); }

 private:
  uint64_t n_;
  double s_;
};

}  // namespace ps::bench
