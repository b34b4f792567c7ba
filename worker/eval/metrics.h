// How good a CTR model is: AUC (the probability that a random click is scored
// above a random non-click; ties count half), logloss (mean negative log
// likelihood, with predictions clipped to [1e-7, 1 - 1e-7]) and normalized
// entropy (NE: the logloss over the base-rate entropy H(p) = -(p ln p +
// (1-p) ln(1-p)) of the same examples' positive rate p, i.e. the logloss of
// always predicting p; NE < 1 means the model beats that constant).
//
// Both are total: any input returns, in O(n log n), without undefined
// behaviour. A non-finite score or probability (NaN, +-inf) has no place in
// a ranking or a likelihood of a working model (it is what a diverged model
// predicts), so either metric is NaN as soon as one appears, rather than a
// number that looks meaningful; callers check with std::isnan and report
// the divergence. A label counts as a click when it is > 0.5 (so a NaN label
// is a non-click).
//
// Thread-safety: the functions are pure; a MetricAccumulator belongs to one
// thread at a time (each thread fills its own, then they are merged).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ps::eval {

// AUC of `scores` against 0/1 `labels`; 0.5 when only one class (or
// nothing) is present; NaN when any score is not finite.
double Auc(std::span<const float> scores, std::span<const float> labels);
// Mean logloss; 0 for no examples; NaN when any probability is not finite.
double LogLoss(std::span<const float> probabilities,
               std::span<const float> labels);

// H(p) in nats: the logloss of always predicting the positive rate p. 0 for
// p <= 0 or p >= 1 (one class only); NaN for a NaN p.
double BaseRateEntropy(double positive_rate);
// logloss / BaseRateEntropy(positive_rate); NaN (undefined, never a division
// by zero) when the examples hold one class only or either input is NaN.
double NormalizedEntropy(double logloss, double positive_rate);
// The fraction of labels that are clicks (> 0.5); 0 for no labels.
double PositiveRate(std::span<const float> labels);

// Where the first non-finite value of `values` is (values.size(): none).
size_t FirstNonFinite(std::span<const float> values);

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
  double positive_rate() const { return PositiveRate(labels_); }
  double normalized_entropy() const {
    return NormalizedEntropy(logloss(), positive_rate());
  }
  // How many predictions are not finite.
  size_t non_finite() const;
  void Clear() {
    predictions_.clear();
    labels_.clear();
  }

 private:
  std::vector<float> predictions_;
  std::vector<float> labels_;
};

}  // namespace ps::eval
