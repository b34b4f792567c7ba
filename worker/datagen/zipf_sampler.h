// ZipfSampler: draws frequency ranks 0..n-1 of a bounded Zipf law,
// P(rank r) proportional to (r + 1)^-exponent, in O(1) memory and O(1)
// expected time per draw, so a field of 10^7 or 10^8 values costs nothing
// to sample from (a CDF table would cost 8 bytes per value).
//
// The method is rejection-inversion (W. Hormann and G. Derflinger,
// "Rejection-inversion to generate variates from monotone discrete
// distributions", ACM TOMACS 6(3), 1996): invert the integral H of the
// continuous hat h(x) = x^-exponent, round to the nearest integer k, and
// accept when the uniform number falls in the part of k's cell of area h(k),
// so that each k is accepted with probability proportional to h(k). h is
// convex, so the cells do not overlap and most draws are accepted at once
// (a squeeze test skips the exact check for nearly all of them).
//
// Thread safety: immutable after Create; Sample is const and may be called
// from several threads at once, each with its own random engine.
#pragma once

#include <cstdint>
#include <random>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::datagen {

class ZipfSampler {
 public:
  // The largest n: ranks are computed in double precision, exact to 2^53.
  static constexpr uint64_t kMaxValues = uint64_t{1} << 53;
  static constexpr double kMaxExponent = 64;

  // kInvalidArgument unless 1 <= n <= kMaxValues and exponent is in
  // [0, kMaxExponent] (0: uniform).
  static StatusOr<ZipfSampler> Create(uint64_t n, double exponent);

  // A rank in [0, n); the same engine state gives the same rank.
  uint64_t Sample(std::mt19937_64& rng) const;

  uint64_t size() const { return n_; }
  double exponent() const { return exponent_; }

 private:
  ZipfSampler(uint64_t n, double exponent);
  double H(double x) const;         // integral of h from 1 to x
  double HInverse(double y) const;  // x with H(x) = y
  double Hat(double x) const;       // h(x) = x^-exponent

  uint64_t n_;
  double exponent_;
  double h_low_;    // H(1.5) - h(1): the lower end of rank 0's cell
  double h_high_;   // H(n + 0.5): the upper end of rank n-1's cell
  double squeeze_;  // k - x at most this: accepted without the exact test
};

}  // namespace ps::datagen
