// How good a CTR model is: AUC (the probability that a random click is scored
// above a random non-click; ties count half) and logloss (mean negative log
// likelihood, with predictions clipped to [1e-7, 1 - 1e-7]).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ps::train {

// AUC of `scores` against 0/1 `labels`; 0.5 when only one class is present.
double Auc(std::span<const float> scores, std::span<const float> labels);
double LogLoss(std::span<const float> probabilities,
               std::span<const float> labels);

// Collects (prediction, label) pairs, e.g. over an evaluation pass.
class MetricAccumulator {
 public:
  void Add(float probability, float label) {
    predictions_.push_back(probability);
    labels_.push_back(label);
  }
  void Merge(const MetricAccumulator& other);
  size_t size() const { return labels_.size(); }
  double auc() const { return Auc(predictions_, labels_); }
  double logloss() const { return LogLoss(predictions_, labels_); }
  void Clear() {
    predictions_.clear();
    labels_.clear();
  }

 private:
  std::vector<float> predictions_;
  std::vector<float> labels_;
};

}  // namespace ps::train
