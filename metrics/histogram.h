// Histogram: observations counted into fixed buckets (upper bounds given at
// creation), with their sum, for latencies and sizes. Observe costs a short
// search of the bounds and relaxed atomic adds (one bucket and the
// sum); nothing locks. Thread-safe; a snapshot taken while others observe
// may be off by the observations in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "metrics/family.h"

namespace ps::metrics {

class Histogram {
 public:
  // `upper_bounds`: increasing, finite (the +Inf bucket is implied).
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  // The state, with `labels`.
  HistogramSample Snapshot(const Labels& labels) const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
};

// Bounds start, start*factor, ... (count of them): e.g. latencies from
// 10 us to ~10 s are ExponentialBounds(1e-5, 2, 21).
std::vector<double> ExponentialBounds(double start, double factor, int count);

}  // namespace ps::metrics
