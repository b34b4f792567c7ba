#include "worker/datagen/zipf_sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ps::datagen {
namespace {

// expm1(t) / t and log1p(t) / t, continuous through t = 0 (exponent 1), where
// the quotients lose their digits: there the first terms of their series.
double ExpM1OverT(double t) {
  if (std::abs(t) < 1e-8) return 1 + t * (0.5 + t / 6);
  return std::expm1(t) / t;
}

double Log1pOverT(double t) {
  if (std::abs(t) < 1e-8) return 1 - t * (0.5 - t / 3);
  return std::log1p(t) / t;
}

// A uniform number in [0, 1) from the top 53 bits of one draw: the same on
// every standard library (std::uniform_real_distribution's need not be).
double Unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

StatusOr<ZipfSampler> ZipfSampler::Create(uint64_t n, double exponent) {
  if (n < 1 || n > kMaxValues) {
    return InvalidArgument("a Zipf law needs 1 to 2^53 values, not " +
                           std::to_string(n));
  }
  if (!(exponent >= 0 && exponent <= kMaxExponent)) {
    return InvalidArgument("a Zipf exponent must be in [0, 64], not " +
                           std::to_string(exponent));
  }
  return ZipfSampler(n, exponent);
}

ZipfSampler::ZipfSampler(uint64_t n, double exponent)
    : n_(n), exponent_(exponent) {
  // Rank r is k = r + 1 of the paper's 1-based numbering. Cell k is the
  // stretch of H's range [H(k + 0.5) - h(k), H(k + 0.5)], of length h(k);
  // the convexity of h makes it lie above H(k - 0.5), so cells are disjoint.
  h_low_ = H(1.5) - Hat(1);
  h_high_ = H(static_cast<double>(n) + 0.5);
  // An x that rounds to k >= 2 lies in cell k when x >= k - squeeze_: the
  // exact bound k - HInverse(H(k + 0.5) - h(k)) is smallest at k = 2 (h
  // flattens as k grows), so its value there serves for every k.
  squeeze_ = 2 - HInverse(H(2.5) - Hat(2));
}

double ZipfSampler::H(double x) const {
  // (x^(1 - s) - 1) / (1 - s), and log(x) at s = 1.
  double log_x = std::log(x);
  return ExpM1OverT((1 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HInverse(double y) const {
  return std::exp(y * Log1pOverT((1 - exponent_) * y));
}

double ZipfSampler::Hat(double x) const {
  return std::exp(-exponent_ * std::log(x));
}

uint64_t ZipfSampler::Sample(std::mt19937_64& rng) const {
  const double n = static_cast<double>(n_);
  for (;;) {
    double u = h_low_ + Unit(rng) * (h_high_ - h_low_);
    double x = HInverse(u);
    // Rounding can put x a hair outside [0.5, n + 0.5]; NaN (u just past
    // H's range at a steep exponent) draws again.
    double k;
    if (x >= n + 0.5) {
      k = n;
    } else if (x >= 0.5) {
      k = std::max(1.0, std::floor(x + 0.5));
    } else if (x < 0.5) {
      k = 1;
    } else {
      continue;
    }
    // Where h(k) falls below the rounding of H (steep exponents, ranks of
    // probability under 1e-11) the exact test rejects a little too often;
    // the squeeze still takes most of such a cell.
    if (k - x <= squeeze_ || u >= H(k + 0.5) - Hat(k)) {
      return static_cast<uint64_t>(k) - 1;
    }
  }
}

}  // namespace ps::datagen
