// StepLoop: what the training threads of one Trainer::Run share, and the
// loop each of them runs over an epoch: take a batch of this worker's
// examples, run it (RunBatch: pull, compute, push), end the step, and with
// checkpoints keep the steps in order around each cut (CheckpointGate).
// The first error (or a diverged batch) stops every thread and is kept.
//
// Thread-safe: the training threads call RunEpoch concurrently; the run's
// own thread reads the counts and may call Fail.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "worker/train/batch_runner.h"
#include "worker/train/checkpoint_gate.h"
#include "worker/train/example_source.h"
#include "worker/train/model.h"
#include "worker/train/param_store.h"
#include "worker/train/progress_log.h"
#include "worker/train/trainer.h"

namespace ps::train {

class StepLoop {
 public:
  struct Params {
    const TrainerOptions* options = nullptr;
    const Model* model = nullptr;
    ParamStore* store = nullptr;
    ModelTables tables;
    ExampleSource* source = nullptr;
    ProgressLog* progress = nullptr;
    // What to change when the model diverged (Trainer::DivergenceHint).
    std::function<std::string()> divergence_hint;
  };
  // Everything Params points to must outlive the loop.
  explicit StepLoop(const Params& params);

  // Starts an epoch's loss mean over.
  void BeginEpoch();
  // One training thread's loop: returns at the end of the epoch's data or
  // once the run stopped.
  void RunEpoch(uint32_t epoch);

  // Stops the run with `s` (the first error is kept).
  void Fail(const Status& s);
  // Stops the run without an error (early stopping, from a gate callback:
  // no later step is taken, every thread returns).
  void Stop();
  bool stopped_early() const { return stopped_early_.load(); }
  Status first_error();
  // Training examples so far, over all epochs.
  uint64_t examples() const { return examples_.load(); }
  // The mean loss of the epoch's examples so far.
  double epoch_logloss();

 private:
  // Takes the next batch into `buffers`; false once the run stopped.
  bool Take(BatchBuffers& buffers, CheckpointGate::Taken* taken);

  const Params p_;
  const bool checkpoints_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_early_{false};
  std::atomic<uint64_t> examples_{0};
  // Steps of this worker taken without checkpoints (with them the gate
  // counts), only to name the step at which training diverged.
  std::atomic<uint64_t> steps_begun_;
  std::unique_ptr<CheckpointGate> gate_;  // with checkpoints
  std::mutex mu_;  // what follows, and the store's EndStep
  double epoch_loss_sum_ = 0;
  uint64_t epoch_count_ = 0;
  Status first_error_;
};

}  // namespace ps::train
