#include "worker/train/field_signal.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "protocol/shard_map.h"

namespace ps::train {

bool FieldSignal::Sampled(uint64_t id, uint32_t shift) {
  if (shift == 0) return true;
  // The feature ids are hashes already; mixed once more (with a salt) so
  // that the sample follows neither the ids' low bits nor the shard map's.
  const uint64_t h = protocol::Mix64(id ^ 0x5a17ed5a17ed5a17ULL);
  return (h & ((uint64_t{1} << shift) - 1)) == 0;
}

void FieldSignal::Add(const data::ExampleBatch& batch) {
  for (size_t e = 0; e < batch.size(); ++e) {
    const bool click = batch.labels[e] > 0.5f;
    for (uint32_t j = batch.offsets[e]; j < batch.offsets[e + 1]; ++j) {
      const uint32_t f = batch.fields[j];
      if (f >= fields_.size()) fields_.resize(f + 1);
      Field& field = fields_[f];
      ++field.occurrences;
      if (!Sampled(batch.ids[j], field.sample_shift)) continue;
      Counts& c = field.values[batch.ids[j]];
      ++c.seen;
      c.clicks += click;
      if (field.values.size() > kMaxValuesPerField) {
        // Keep half: the values of the next sample are among this one's.
        ++field.sample_shift;
        std::erase_if(field.values, [&](const auto& v) {
          return !Sampled(v.first, field.sample_shift);
        });
      }
    }
  }
}

std::vector<FieldEstimate> FieldSignal::Estimates() const {
  std::vector<FieldEstimate> out(fields_.size());
  for (size_t f = 0; f < fields_.size(); ++f) {
    const Field& field = fields_[f];
    FieldEstimate& e = out[f];
    e.occurrences = field.occurrences;
    e.sampled_values = field.values.size();
    e.sample_fraction = std::ldexp(1.0, -static_cast<int>(field.sample_shift));
    e.prior_count = std::numeric_limits<double>::infinity();
    double n = 0, clicks = 0, sum_sq = 0;
    for (const auto& [id, c] : field.values) {
      n += static_cast<double>(c.seen);
      clicks += static_cast<double>(c.clicks);
      sum_sq += static_cast<double>(c.seen) * static_cast<double>(c.seen);
    }
    if (n == 0) continue;
    const double p = clicks / n;
    e.click_rate = p;
    const double noise = p * (1 - p);
    const double d = static_cast<double>(field.values.size());
    const double denominator = n - sum_sq / n - (d - 1);
    if (noise <= 0 || d < 2 || denominator <= 1e-9 * n) continue;
    double s = 0;
    for (const auto& [id, c] : field.values) {
      const double rate = static_cast<double>(c.clicks) / c.seen;
      s += static_cast<double>(c.seen) * (rate - p) * (rate - p);
    }
    e.signal_variance = (s - (d - 1) * noise) / denominator;
    // The shrinkage constant: noise within a value over the signal.
    if (e.signal_variance > 0) {
      e.prior_count =
          std::max(noise - e.signal_variance, 0.0) / e.signal_variance;
    }
  }
  return out;
}

std::vector<uint32_t> FieldSignal::Thresholds(
    const std::vector<FieldEstimate>& estimates, double reliability,
    uint32_t num_workers, uint32_t max_threshold) {
  std::vector<uint32_t> out;
  out.reserve(estimates.size());
  const double odds = reliability / (1 - reliability);
  for (const FieldEstimate& e : estimates) {
    const double frequent = std::ceil(
        kAlwaysAdmitShare * static_cast<double>(e.occurrences) / num_workers);
    double t = std::ceil(e.prior_count * odds / num_workers);
    if (e.occurrences > 0) t = std::min(t, frequent);
    out.push_back(std::isfinite(t)
                      ? static_cast<uint32_t>(std::clamp(
                            t, 1.0, static_cast<double>(max_threshold)))
                      : kNever);
  }
  return out;
}

double FieldSignal::AdmittedValues(
    const std::vector<uint32_t>& thresholds) const {
  double admitted = 0;
  for (size_t f = 0; f < fields_.size() && f < thresholds.size(); ++f) {
    uint64_t in_sample = 0;
    for (const auto& [id, c] : fields_[f].values) {
      in_sample += c.seen >= thresholds[f];
    }
    admitted += std::ldexp(static_cast<double>(in_sample),
                           static_cast<int>(fields_[f].sample_shift));
  }
  return admitted;
}

}  // namespace ps::train
