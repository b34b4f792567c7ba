#include "worker/train/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ps::train {

double Auc(std::span<const float> scores, std::span<const float> labels) {
  const size_t n = std::min(scores.size(), labels.size());
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney U: sum of the positives' ranks, ties sharing their mean rank.
  double positives = 0, rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
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
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    double p = std::clamp<double>(probabilities[i], 1e-7, 1 - 1e-7);
    sum -= labels[i] > 0.5f ? std::log(p) : std::log(1 - p);
  }
  return sum / static_cast<double>(n);
}

void MetricAccumulator::Merge(const MetricAccumulator& other) {
  predictions_.insert(predictions_.end(), other.predictions_.begin(),
                      other.predictions_.end());
  labels_.insert(labels_.end(), other.labels_.begin(), other.labels_.end());
}

}  // namespace ps::train
