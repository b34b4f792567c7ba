// Counter and Gauge: one sample each, updated lock-free (relaxed atomics),
// read at scrape time. Owned by a Registry (registry.h), which hands out
// stable pointers. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace ps::metrics {

// A count that only goes up (Prometheus counter; name it ..._total).
class Counter {
 public:
  void Increment(uint64_t n = 1) {
    value_.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double d) { value_.fetch_add(d, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

}  // namespace ps::metrics
