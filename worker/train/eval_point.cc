#include "worker/train/eval_point.h"

#include <cstdio>

namespace ps::train {

std::string NeText(const EvalPoint& p) {
  if (!p.ne_defined()) {
    if (p.positive_rate > 0 && p.positive_rate < 1) {
      return "NE undefined (the logloss is not finite)";
    }
    return p.positive_rate >= 1
               ? "NE undefined (the eval examples are all clicks)"
               : "NE undefined (the eval examples hold no click)";
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "NE %.4f", p.ne);
  return buf;
}

std::string EvalMetricsText(const EvalPoint& p) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "AUC %.4f logloss %.4f ", p.auc, p.logloss);
  return buf + NeText(p);
}

std::string NeJson(const EvalPoint& p) {
  if (!p.ne_defined()) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", p.ne);
  return buf;
}

}  // namespace ps::train
