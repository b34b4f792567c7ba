// CLOCK_MONOTONIC in nanoseconds: one clock for every process of a host, so
// that decode can measure from a stamp prefill took (control_region.h).
//
// Thread-safe.
#pragma once

#include <time.h>

#include <cstdint>

namespace ps::kv {

inline uint64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace ps::kv
