#include "metrics/histogram.h"

#include <algorithm>

namespace ps::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double value) {
  const size_t i = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) -
      bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

HistogramSample Histogram::Snapshot(const Labels& labels) const {
  HistogramSample h;
  h.labels = labels;
  h.upper_bounds = bounds_;
  h.bucket_counts.resize(bounds_.size());
  uint64_t total = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    h.bucket_counts[i] = buckets_[i].load(std::memory_order_relaxed);
    total += h.bucket_counts[i];
  }
  total += buckets_[bounds_.size()].load(std::memory_order_relaxed);
  // The count is the sum of the buckets, so the rendered +Inf bucket is
  // never below a finite one even while others observe.
  h.count = total;
  h.sum = sum_.load(std::memory_order_relaxed);
  return h;
}

std::vector<double> ExponentialBounds(double start, double factor, int count) {
  std::vector<double> b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

}  // namespace ps::metrics
