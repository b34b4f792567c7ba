#include "worker/train/early_stop.h"

#include <cmath>

namespace ps::train {

EarlyStop::Verdict EarlyStop::Observe(const EvalPoint& point) {
  Verdict v;
  if (!std::isnan(point.logloss) &&
      (!best_.has_value() || point.logloss < best_->logloss)) {
    best_ = point;
    since_best_ = 0;
    v.best = true;
    return v;
  }
  ++since_best_;
  v.stop = since_best_ >= patience_;
  return v;
}

}  // namespace ps::train
