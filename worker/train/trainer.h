// Trainer: mini-batch training of a Model whose parameters live in a
// ParamStore, with evaluation and progress reporting.
//
// Each of `threads` threads repeats: take a batch of this worker's examples
// (ExampleSource), gather its distinct keys, pull their rows (and the dense
// table, if the model has one), compute loss and gradients, push them, end
// the step. After the last epoch every worker flushes its pushes and meets
// the others at a barrier; then the evaluating worker scores the held-out
// examples (--eval_data, or every holdout_every-th line of the training
// file when there is none) and reports AUC, logloss and normalized entropy
// (NE). Evaluation also runs every `eval_every` training examples (per
// worker) and after each epoch. An eval with NE >= 1 (no better than
// predicting the base rate) is logged as a WARNING naming the sparse
// table's optimizer and learning rate.
//
// Early stopping (early_stop): the eval points (instead of the ones after
// each epoch and every eval_every examples; the final eval stays) are step
// boundaries, every eval_steps steps, where this worker's threads are paused
// (through the CheckpointGate, as for a checkpoint) and the eval sees exactly
// the parameters of that step. Locally the trainer evaluates there itself and
// keeps a copy of the best parameters (keep_best / restore_best); with
// servers eval_cut pauses every worker at that step (see
// client/checkpoint_sync.h: a checkpoint of the servers the best one
// is kept of) and says whether training stops. Training stops after
// early_stop_patience eval points without a new best eval logloss; the
// result's `best` is the best point.
//
// Progress (samples/s, mean training loss, AUC over recent training
// predictions, ETA) goes to stderr every progress_secs: rewritten in place
// with '\r' on a terminal, as plain lines otherwise.
//
// The parts, by job: trainer.cc runs the epochs (and TrainResultJson),
// step_loop.h the training threads' loop, checkpoint_gate.h the step order
// around checkpoints, progress_log.h the report on stderr, batch_runner.h
// one batch through the model, trainer_eval.cc Evaluate, feature_admission.h
// the sparse table's frequency admission.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "worker/data/csv_layout.h"
#include "worker/data/line_parsers.h"
#include "worker/data/line_reader.h"
#include "worker/train/eval_point.h"
#include "worker/train/feature_admission.h"
#include "worker/train/model.h"
#include "worker/train/param_store.h"

namespace ps::train {

struct SourceOptions;  // example_source.h
struct TrainStats;     // train_stats.h

class EarlyStop;
class MetricsOut;
class ProgressLog;
class StepLoop;
struct TrainResult;

struct TrainerOptions {
  std::string train_data;
  std::string eval_data;  // empty: a held-out split of train_data
  data::DataFormat format = data::DataFormat::kCriteo;
  std::string csv_spec;  // kCsv: the columns (worker/data/csv_layout.h)
  bool strict_data = false;
  uint32_t epochs = 1;
  uint32_t batch_size = 1000;
  uint32_t threads = 1;
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
  uint64_t seed = 1;
  uint32_t holdout_every = 10;  // without eval_data
  bool evaluate = true;         // this worker scores the eval set
  uint64_t eval_every = 0;      // training examples between evals (0: off)
  double progress_secs = 10;
  bool progress_in_place = false;  // stderr is a terminal
  // --metrics_out: every progress point (every progress_secs, or every
  // second when progress lines are off) and eval point also goes here.
  std::shared_ptr<MetricsOut> metrics_out;
  std::string sparse_table = "emb";
  std::string dense_table = "mlp";

  // Resuming from a checkpoint: the steps already done, and this worker's
  // data position then (epoch, lines of ours consumed in it), so a resumed
  // epoch neither repeats nor skips lines.
  uint64_t start_step = 0;
  uint32_t start_epoch = 0;
  uint64_t start_consumed = 0;
  // Checkpoints (null: none). checkpoint_due(step) says whether a
  // checkpoint follows step `step` (1-based, counted from the start of
  // training; the same answer on every worker); checkpoint(step, epoch,
  // consumed) takes it with no batch of this worker in flight. With them,
  // batches are taken from the data one at a time in step order (parsing
  // included), so that the cut holds exactly the batches of steps <= step.
  std::function<StatusOr<bool>(uint64_t step)> checkpoint_due;
  std::function<Status(uint64_t step, uint32_t epoch, uint64_t consumed)>
      checkpoint;
  // The sparse table's frequency admission (when its spec sets
  // admit_after_examples): the memory of its sketch.
  uint64_t admission_sketch_bytes = uint64_t{32} << 20;

  // Early stopping (see above). eval_steps >= 1 with early_stop.
  bool early_stop = false;
  uint32_t early_stop_patience = 2;
  uint64_t eval_steps = 0;
  // What one early-stop eval found: whether it is the best so far and
  // whether training stops.
  struct EvalVerdict {
    bool best = false, stop = false;
    EvalPoint point;
  };
  using EvalFn = std::function<StatusOr<EvalVerdict>()>;
  // Servers: pauses every worker at `step` (a checkpoint cut when the
  // servers keep checkpoints), runs `evaluate` on the evaluating worker
  // there and returns whether training stops (the same answer on every
  // worker). Null: --local.
  std::function<StatusOr<bool>(uint64_t step, uint32_t epoch, uint64_t consumed,
                               const EvalFn& evaluate)>
      eval_cut;
  // --local: copy the parameters aside as the best / bring that copy back.
  std::function<Status()> keep_best, restore_best;
  // Metrics (null: none): examples, loss, running AUC and every eval point
  // go there as training runs (train_stats.h).
  TrainStats* stats = nullptr;
};

struct TrainResult {
  uint64_t train_examples = 0;  // over all epochs, this worker
  double train_logloss = 0;     // mean over the last epoch
  double train_seconds = 0;
  double samples_per_sec = 0;
  uint64_t malformed_lines = 0;
  std::vector<std::string> first_malformed;
  bool evaluated = false;
  EvalPoint final_eval;
  std::vector<EvalPoint> history;
  // Early stopping: whether it stopped training before the last epoch, and
  // the best eval point (has_best: there was one).
  bool early_stopped = false;
  bool has_best = false;
  EvalPoint best;
};

// Run and Evaluate fail (kInvalidArgument, "training diverged at step S:
// loss is nan; lower the learning rate of table ...") as soon as a loss or
// prediction is not finite, instead of training on NaN: nothing of that
// batch is pushed.
class Trainer {
 public:
  // Checks that the store has the model's tables with the right shapes.
  static StatusOr<Trainer> Create(const TrainerOptions& options,
                                  const Model* model, ParamStore* store);

  StatusOr<TrainResult> Run();
  // Scores the evaluation examples with the current parameters.
  StatusOr<EvalPoint> Evaluate(uint32_t threads);
  // The sparse table's frequency admission, or null (feature_admission.h).
  const FeatureAdmission* admission() const { return admission_.get(); }
  // With admission and counts not yet complete: counts this worker's
  // share of the training data once (parsing only) and freezes the counts.
  // Run does it itself when it resumes; --eval_only calls it before
  // Evaluate. trainer_admission.cc.
  Status CountAdmissionPass();
  // Logs a WARNING when `point` is no better than predicting the base rate
  // (NE >= 1), naming what to lower. Returns whether it warned.
  bool WarnIfNoBetterThanBaseRate(const EvalPoint& point) const;

 private:
  Trainer(const TrainerOptions& o, const Model* m, ParamStore* s)
      : options_(o), model_(m), store_(s) {}
  // What to change when the model's numbers stop being finite: the
  // optimizer settings of its tables.
  std::string DivergenceHint() const;
  // How Run reads the training data: this worker's lines, without the
  // held-out ones (CountAdmissionPass reads the same).
  SourceOptions TrainSourceOptions() const;
  // kInvalidArgument unless the CSV file `eval` (at its first line) has the
  // feature columns of `train`, in its order.
  Status CheckSameCsvFields(const data::CsvLayout& train,
                            data::LineReader* eval) const;
  // Early stopping: `run` (the options the StepLoop gets) with the eval
  // points in its CheckpointGate calls (trainer_early_stop.cc); *loop is
  // the loop they stop, set once it exists.
  void InstallEvalPoints(TrainerOptions* run, EarlyStop* early,
                         StepLoop* const* loop, TrainResult* result,
                         ProgressLog* progress);
  // Early stopping, after training: the best point into `result` and, with
  // keep_best, the best parameters back (evaluated once more: the final
  // eval line is theirs).
  Status FinishEarlyStop(const EarlyStop& early, TrainResult* result,
                         ProgressLog* progress);

  TrainerOptions options_;
  const Model* model_;
  ParamStore* store_;
  uint32_t sparse_id_ = 0;
  uint32_t dense_id_ = 0;
  std::shared_ptr<FeatureAdmission> admission_;  // null: admission off
};

// The result as JSON (for --metrics_json).
std::string TrainResultJson(const TrainResult& result, const std::string& model,
                            bool local, const TrainerOptions& options);

}  // namespace ps::train
