#include "worker/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ps::eval {

size_t FirstNonFinite(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return values.size();
}

double Auc(std::span<const float> scores, std::span<const float> labels) {
  const size_t n = std::min(scores.size(), labels.size());
  scores = scores.first(n);
  // Checked first: std::sort needs a strict weak order, which NaN breaks
  // (undefined behaviour, in practice reads past the array), and the tie
  // loop below would never advance past a NaN (NaN != NaN).
  if (FirstNonFinite(scores) < n) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney U: sum of the positives' ranks, ties sharing their mean rank.
  double positives = 0, rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    double mean_rank =
        (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] > 0.5f) {
        positives += 1;
        rank_sum += mean_rank;
      }
    }
    i = j;
  }
  double negatives = static_cast<double>(n) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

double LogLoss(std::span<const float> probabilities,
               std::span<const float> labels) {
  const size_t n = std::min(probabilities.size(), labels.size());
  if (n == 0) return 0.0;
  // Without this, +-inf would be clipped into a finite, plausible loss.
  if (FirstNonFinite(probabilities.first(n)) < n) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    double p = std::clamp<double>(probabilities[i], 1e-7, 1 - 1e-7);
    sum -= labels[i] > 0.5f ? std::log(p) : std::log(1 - p);
  }
  return sum / static_cast<double>(n);
}

double BaseRateEntropy(double p) {
  if (std::isnan(p)) return std::numeric_limits<double>::quiet_NaN();
  if (p <= 0 || p >= 1) return 0;
  return -(p * std::log(p) + (1 - p) * std::log1p(-p));
}

double NormalizedEntropy(double logloss, double positive_rate) {
  const double h = BaseRateEntropy(positive_rate);
  // One class only: every constant near it has a loss near 0, so no ratio
  // says anything (and H(p) = 0 would divide by zero).
  if (std::isnan(logloss) || std::isnan(h) || h <= 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return logloss / h;
}

double PositiveRate(std::span<const float> labels) {
  if (labels.empty()) return 0;
  size_t positives = 0;
  for (float l : labels) positives += l > 0.5f ? 1 : 0;
  return static_cast<double>(positives) / static_cast<double>(labels.size());
}

void MetricAccumulator::Merge(const MetricAccumulator& other) {
  predictions_.insert(predictions_.end(), other.predictions_.begin(),
                      other.predictions_.end());
  labels_.insert(labels_.end(), other.labels_.begin(), other.labels_.end());
}

size_t MetricAccumulator::non_finite() const {
  return static_cast<size_t>(
      std::count_if(predictions_.begin(), predictions_.end(),
                    [](float p) { return !std::isfinite(p); }));
}

}  // namespace ps::eval
