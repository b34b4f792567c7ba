// EarlyStop: decides, eval point by eval point, whether training goes on
// (--early_stop): the best point is the one with the lowest eval logloss
// (for one eval set NE orders points alike; AUC ignores calibration, which
// is what a diverging learning rate ruins first), and training stops after
// `patience` eval points in a row without a new best.
//
// A point whose logloss is NaN (a diverged model) is never the best and
// counts against the patience like any other point without a new best.
//
// Not thread-safe: the one thread that evaluates calls it.
#pragma once

#include <cstdint>
#include <optional>

#include "worker/train/eval_point.h"

namespace ps::train {

class EarlyStop {
 public:
  // patience >= 1 (the flag check refuses 0).
  explicit EarlyStop(uint32_t patience) : patience_(patience) {}

  struct Verdict {
    bool best = false;  // the point is the best so far
    bool stop = false;  // patience points in a row brought no new best
  };
  Verdict Observe(const EvalPoint& point);

  // The best point so far (none before the first finite one).
  const std::optional<EvalPoint>& best() const { return best_; }
  uint32_t patience() const { return patience_; }

 private:
  const uint32_t patience_;
  std::optional<EvalPoint> best_;
  uint32_t since_best_ = 0;  // points observed since the best
};

}  // namespace ps::train
