// FieldSignal: how much each field's values tell about the label, measured
// on the training data before training, for adaptive admission
// (feature_admission.h): a value gets its own row once its count is large
// enough to estimate its weight.
//
// The rule. The values' true click rates spread around the field's rate p
// with variance tau2_f (the field's signal); a value v seen n_v times has an
// empirical rate whose noise variance is s2 / n_v, s2 = p (1 - p) - tau2_f
// (a Bernoulli's variance, on average over the values). The best estimate
// of v's rate shrinks its own rate toward p with weight n_v / (n_v + n*_f),
// n*_f = s2 / tau2_f: the count from which a value's own data outweigh the
// field's prior. A value
// whose own estimate would carry weight at least r (the spec's
// reliability, 0.5 by default) gets its own row: n_v >= n*_f r / (1 - r).
// This depends on what the data say, not on the log's size: a field of a
// few strong values admits them after a handful of occurrences, a field of
// many weak ones only after hundreds, in a 50k-row log as in a 45M-row one.
//
// tau2_f is estimated by the method of moments of the one-way random
// effects model (ANOVA) for Bernoulli outcomes, whose noise variance within
// a value is p (1 - p) - tau2 on average: with N occurrences of D values,
//   S = sum_v n_v (rate_v - p)^2,  E[S] = A tau2 + (D - 1)(p (1 - p) - tau2),
//   A = N - sum_v n_v^2 / N,  so tau2 = (S - (D - 1) p (1 - p)) /
//                                       (A - (D - 1)).
// (Values seen once tell nothing apart from the noise: with only those the
// denominator is 0 and the field has no estimate.)
// A field with no measurable signal (tau2 <= 0) gets the largest threshold:
// its values share the OOV row.
//
// One bound on top: a value that makes up kAlwaysAdmitShare of its field's
// occurrences gets its own row whatever n* says. tau2 is the spread of the
// values' own click rates, so it sees what an LR weight can learn, not what
// an FM factor can: a value frequent enough for its factors to be estimated
// may carry interactions with no marginal effect at all. FM (Adagrad 0.05)
// on generated Criteo-like rows, adaptive admission without and with the
// bound: eval AUC 0.7098 -> 0.7139 at 1M rows, 0.5583 -> 0.5664 at 10k.
//
// Counting is exact for a sample of each field's values, chosen by a hash
// of the value (so a sampled value is counted at every occurrence): every
// value while a field has at most kMaxValuesPerField, then half of them,
// a quarter, ... (the values of a more selective sample are a subset of
// the previous one's, so their counts stay complete).
//
// Not thread-safe: one thread counts (the counting pass), then Thresholds.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "worker/data/example_batch.h"

namespace ps::train {

// One field's measurement.
struct FieldEstimate {
  uint64_t occurrences = 0;     // of the field in the examples counted
  uint64_t sampled_values = 0;  // distinct values in the sample
  double sample_fraction = 1;   // of the field's values in the sample
  double click_rate = 0;        // p over the sample's occurrences
  double signal_variance = 0;   // tau2 (<= 0: none measurable)
  double prior_count = 0;       // n* = (p (1 - p) - tau2) / tau2; inf: none
};

class FieldSignal {
 public:
  static constexpr size_t kMaxValuesPerField = 1 << 16;

  // Counts every feature of the batch with its example's label.
  void Add(const data::ExampleBatch& batch);

  // The estimate of every field seen (index = field).
  std::vector<FieldEstimate> Estimates() const;

  // A field without measurable signal: no value of it is admitted (unless
  // it is frequent: kAlwaysAdmitShare).
  static constexpr uint32_t kNever = UINT32_MAX;
  static constexpr double kAlwaysAdmitShare = 0.01;
  // Each field's admission threshold in a worker's own counts: ceil(n*_f r
  // / (1 - r) / num_workers), at most ceil(kAlwaysAdmitShare times the
  // field's occurrences / num_workers), in [1, max_threshold]; kNever for a
  // field without signal or occurrences. `reliability` in (0, 1).
  static std::vector<uint32_t> Thresholds(
      const std::vector<FieldEstimate>& estimates, double reliability,
      uint32_t num_workers, uint32_t max_threshold);

  // About how many distinct values reach their field's threshold (the
  // samples' count scaled up by their fractions).
  double AdmittedValues(const std::vector<uint32_t>& thresholds) const;

 private:
  struct Counts {
    uint64_t seen = 0;
    uint64_t clicks = 0;
  };
  struct Field {
    uint64_t occurrences = 0;
    uint32_t sample_shift = 0;  // values whose hash has this many low zero bits
    std::unordered_map<uint64_t, Counts> values;
  };
  static bool Sampled(uint64_t id, uint32_t shift);
  std::vector<Field> fields_;
};

}  // namespace ps::train
