// EvalPoint: one evaluation of a model on the held-out examples (what
// Trainer::Evaluate returns, the trainer's history and early stopping keep,
// and the eval lines and --metrics_json print), and how it is printed.
//
// Thread-safety: a value type; the functions are pure.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace ps::train {

struct EvalPoint {
  uint64_t trained_examples = 0;
  // The training step it was taken at, when it was taken at a step boundary
  // of every worker (--early_stop's eval points); 0 otherwise.
  uint64_t step = 0;
  double auc = 0, logloss = 0;
  double positive_rate = 0;  // of the eval examples
  // Normalized entropy: logloss / H(positive_rate); NaN when undefined (the
  // eval examples hold one class only).
  double ne = 0;
  uint64_t examples = 0;

  bool ne_defined() const { return !std::isnan(ne); }
  // No better than always predicting the base rate.
  bool no_better_than_base_rate() const { return ne_defined() && ne >= 1; }
};

// "NE 0.8312", or "NE undefined (the eval examples are all clicks)".
std::string NeText(const EvalPoint& p);
// "AUC 0.7312 logloss 0.4821 NE 0.8312": what every eval line says.
std::string EvalMetricsText(const EvalPoint& p);
// The JSON value of NE: the number, or null when undefined.
std::string NeJson(const EvalPoint& p);

}  // namespace ps::train
