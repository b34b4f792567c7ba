// ProgressLog: the trainer's progress report on stderr: samples/s, mean
// training loss since the last line, AUC over recent training predictions
// and an ETA every progress_secs, and a line per evaluation. Lines are
// rewritten in place with '\r' on a terminal, plain lines otherwise.
//
// Thread-safe: training threads call AddBatch concurrently; one thread
// writes the lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace ps::train {

struct EvalPoint;
struct TrainStats;

class ProgressLog {
 public:
  // `stats` (null: none) gets every batch and eval, and the running AUC
  // on PublishAuc (train_stats.h).
  ProgressLog(uint32_t epochs, bool in_place, TrainStats* stats = nullptr);

  // A trained batch: its loss summed over its probs.size() examples, and
  // their predictions and labels.
  void AddBatch(double loss, std::span<const float> probs,
                std::span<const float> labels);

  // One progress line for `epoch` (0-based) after `examples` examples;
  // the ETA comes from examples_per_epoch once known (0: not yet), else
  // from fraction_read (the share of this epoch's data read; < 0: unknown).
  // Restarts the mean loss.
  void Line(uint32_t epoch, uint64_t examples, uint64_t examples_per_epoch,
            double fraction_read, bool final_line);
  void EvalLine(const EvalPoint& point);
  // With stats: the AUC over the recent training predictions into them.
  void PublishAuc();

 private:
  // Recent training predictions, for a running AUC.
  static constexpr size_t kWindow = 50000;

  const uint32_t epochs_;
  const bool in_place_;
  TrainStats* const stats_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;  // what follows
  double loss_sum_ = 0;
  uint64_t loss_count_ = 0;
  std::vector<float> probs_, labels_;  // a ring of kWindow
  size_t next_ = 0;
};

}  // namespace ps::train
