// Quantization error monitoring: running max and RMS of |sent - original|
// per (table, value type), for workers and servers to report.
//
// Off unless the owner switches it on (a flag becomes the constructor
// argument): a disabled QuantStats costs one branch per Record. The caller
// owns the object (no globals); Record and Snapshot may be called from any
// number of threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "kernels/quantize.h"

namespace ps::kernels {

struct QuantErrorStats {
  uint64_t values = 0;           // values recorded
  double max_abs_error = 0.0;    // largest |dequantized - original|
  double sum_sq_error = 0.0;     // sum of squared errors
  double sum_sq_original = 0.0;  // sum of squared originals (finite errors)
  double rms_error() const;      // sqrt(sum_sq_error / values), 0 if none
  // ||dequantized - original|| / ||original|| over everything recorded;
  // 0 when the originals are all 0.
  double relative_l2_error() const;
};

class QuantStats {
 public:
  explicit QuantStats(bool enabled) : enabled_(enabled) {}
  QuantStats(const QuantStats&) = delete;
  QuantStats& operator=(const QuantStats&) = delete;

  bool enabled() const { return enabled_; }

  // Adds the errors of `dequantized` against `original` (same length) to
  // (table, type). Non-finite errors are counted in `values` but not in the
  // max or sum (they are reported by the decoder, not averaged away).
  void Record(uint32_t table, ValueType type, std::span<const float> original,
              std::span<const float> dequantized);

  // Stats of one (table, type); zeros when nothing was recorded.
  QuantErrorStats Get(uint32_t table, ValueType type) const;

  struct Entry {
    uint32_t table;
    ValueType type;
    QuantErrorStats stats;
  };
  // Every (table, type) recorded so far, ordered by table then type.
  std::vector<Entry> Snapshot() const;

  void Reset();

 private:
  const bool enabled_;
  mutable std::mutex mu_;
  std::map<std::pair<uint32_t, uint8_t>, QuantErrorStats> stats_;
};

}  // namespace ps::kernels
