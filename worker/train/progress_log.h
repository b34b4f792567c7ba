// ProgressLog: the trainer's progress report on stderr: samples/s, mean
// training loss since the last line, AUC over recent training predictions
// and an ETA every progress_secs, and a line per evaluation. Lines are
// rewritten in place with '\r' on a terminal, plain lines otherwise.
// With a MetricsOut (--metrics_out) each progress and eval point is also
// appended there as a JSON line.
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
class MetricsOut;
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
  // Restarts the mean loss. print=false: only to the MetricsOut (progress
  // lines are off, --progress_secs=0, but curves are wanted).
  void Line(uint32_t epoch, uint64_t examples, uint64_t examples_per_epoch,
            double fraction_read, bool final_line, bool print = true);
  void EvalLine(const EvalPoint& point, bool final_eval = false);

  // Where the points also go (null: nowhere); set before training starts.
  void set_metrics(MetricsOut* metrics) { metrics_ = metrics; }
  bool has_metrics() const { return metrics_ != nullptr; }
  // With stats: the AUC over the recent training predictions into them.
  void PublishAuc();

 private:
  // Recent training predictions, for a running AUC.
  static constexpr size_t kWindow = 50000;

  const uint32_t epochs_;
  const bool in_place_;
  TrainStats* const stats_;
  const std::chrono::steady_clock::time_point start_;
  MetricsOut* metrics_ = nullptr;
  std::mutex mu_;  // what follows
  double loss_sum_ = 0;
  uint64_t loss_count_ = 0;
  std::vector<float> probs_, labels_;  // a ring of kWindow
  size_t next_ = 0;
};

}  // namespace ps::train
