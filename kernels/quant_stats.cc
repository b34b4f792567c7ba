#include "kernels/quant_stats.h"

#include <algorithm>
#include <cmath>

namespace ps::kernels {

double QuantErrorStats::rms_error() const {
  return values == 0 ? 0.0
                     : std::sqrt(sum_sq_error / static_cast<double>(values));
}

double QuantErrorStats::relative_l2_error() const {
  return sum_sq_original > 0 ? std::sqrt(sum_sq_error / sum_sq_original) : 0.0;
}

void QuantStats::Record(uint32_t table, ValueType type,
                        std::span<const float> original,
                        std::span<const float> dequantized) {
  if (!enabled_) return;
  // Reduce outside the lock; the lock only merges.
  const size_t n = std::min(original.size(), dequantized.size());
  double max_err = 0.0, sum_sq = 0.0, sum_sq_original = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double err = std::fabs(double{dequantized[i]} - double{original[i]});
    if (!std::isfinite(err)) continue;
    max_err = std::max(max_err, err);
    sum_sq += err * err;
    sum_sq_original += double{original[i]} * double{original[i]};
  }
  std::lock_guard<std::mutex> lock(mu_);
  QuantErrorStats& s = stats_[{table, static_cast<uint8_t>(type)}];
  s.values += n;
  s.max_abs_error = std::max(s.max_abs_error, max_err);
  s.sum_sq_error += sum_sq;
  s.sum_sq_original += sum_sq_original;
}

QuantErrorStats QuantStats::Get(uint32_t table, ValueType type) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = stats_.find({table, static_cast<uint8_t>(type)});
  return it == stats_.end() ? QuantErrorStats{} : it->second;
}

std::vector<QuantStats::Entry> QuantStats::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Entry> out;
  out.reserve(stats_.size());
  for (const auto& [key, s] : stats_)
    out.push_back(Entry{key.first, static_cast<ValueType>(key.second), s});
  return out;
}

void QuantStats::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.clear();
}

}  // namespace ps::kernels
