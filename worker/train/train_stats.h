// TrainStats: the training numbers a worker exports as metrics, written by
// the trainer (through ProgressLog) and read at scrape time by whoever
// holds it (worker/ps_worker_metrics.h). Owned by the caller (no globals);
// every field is a relaxed atomic, so any thread may read while training
// threads write. Values are as of the last update, not a consistent cut.
#pragma once

#include <atomic>
#include <cstdint>

namespace ps::train {

struct TrainStats {
  // Every trained example, and the sum of their losses (its mean over an
  // interval is the interval's training logloss).
  std::atomic<uint64_t> examples{0};
  std::atomic<double> loss_sum{0};
  // AUC over the recent training predictions (the progress line's), updated
  // about once a second while training; -1 before the first.
  std::atomic<double> train_auc{-1};
  // The last evaluation (evaluations 0: none yet).
  std::atomic<uint64_t> evaluations{0};
  std::atomic<double> eval_auc{0};
  std::atomic<double> eval_logloss{0};
  std::atomic<double> eval_ne{0};
  std::atomic<uint64_t> eval_examples{0};
};

}  // namespace ps::train
