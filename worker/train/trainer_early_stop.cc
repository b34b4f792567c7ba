// Trainer's early stopping (--early_stop): the eval points in the step
// order of the CheckpointGate, and what is reported and kept at the end.
#include <glog/logging.h>

#include <cstdio>

#include "worker/train/early_stop.h"
#include "worker/train/progress_log.h"
#include "worker/train/step_loop.h"
#include "worker/train/trainer.h"

namespace ps::train {

void Trainer::InstallEvalPoints(TrainerOptions* run, EarlyStop* early,
                                StepLoop* const* loop, TrainResult* result,
                                ProgressLog* progress) {
  const uint64_t every = options_.eval_steps;
  auto due = options_.checkpoint_due;  // the servers' schedule, or none
  auto checkpoint = options_.checkpoint;
  run->checkpoint_due = [due, every](uint64_t step) -> StatusOr<bool> {
    if (step % every == 0) return true;
    if (!due) return false;
    return due(step);
  };
  run->checkpoint = [=, this](uint64_t step, uint32_t epoch,
                              uint64_t consumed) -> Status {
    // Not an eval point: a checkpoint the servers' schedule asked for.
    if (step % every != 0) return checkpoint(step, epoch, consumed);
    // Every thread of this worker waits in the gate: the eval sees exactly
    // the parameters of this step (with servers, eval_cut holds the other
    // workers too), so it may use all of them.
    auto evaluate = [&]() -> StatusOr<TrainerOptions::EvalVerdict> {
      PS_ASSIGN_OR_RETURN(EvalPoint p, Evaluate(options_.threads));
      p.step = step;
      p.trained_examples = (*loop)->examples();
      result->history.push_back(p);
      progress->EvalLine(p);
      WarnIfNoBetterThanBaseRate(p);
      const EarlyStop::Verdict v = early->Observe(p);
      if (v.best && options_.keep_best)
        PS_RETURN_IF_ERROR(options_.keep_best());
      return TrainerOptions::EvalVerdict{v.best, v.stop, p};
    };
    bool stop = false;
    if (options_.eval_cut) {
      PS_ASSIGN_OR_RETURN(stop,
                          options_.eval_cut(step, epoch, consumed, evaluate));
    } else if (options_.evaluate) {
      PS_ASSIGN_OR_RETURN(TrainerOptions::EvalVerdict v, evaluate());
      stop = v.stop;
    }
    if (stop && !early->best()) {
      LOG(INFO) << "early stop after step " << step
                << ": the evaluating worker's evals stopped training";
    } else if (stop) {
      LOG(INFO) << "early stop after step " << step << ": " << early->patience()
                << " eval point(s) in a row without a better eval logloss "
                   "than step "
                << early->best()->step << "'s "
                << EvalMetricsText(*early->best());
    }
    if (stop) {
      (*loop)->Stop();
    }
    return Status::OK();
  };
}

Status Trainer::FinishEarlyStop(const EarlyStop& early, TrainResult* result,
                                ProgressLog* progress) {
  if (!early.best().has_value()) return Status::OK();
  result->has_best = true;
  result->best = *early.best();
  // The final eval (when training ran to its end) was the best: nothing
  // to bring back.
  if (result->evaluated && result->best.step == 0) return Status::OK();
  if (options_.restore_best) {
    PS_RETURN_IF_ERROR(options_.restore_best());
    PS_ASSIGN_OR_RETURN(EvalPoint p, Evaluate(options_.threads));
    p.step = result->best.step;
    p.trained_examples = result->best.trained_examples;
    std::fprintf(stderr, "eval of the best parameters kept (step %llu):\n",
                 static_cast<unsigned long long>(p.step));
    progress->EvalLine(p);
    result->final_eval = p;
  } else {
    // Servers: they hold the latest parameters; the best point's are in
    // the checkpoint kept as the best (when they keep checkpoints).
    result->final_eval = result->best;
  }
  result->evaluated = true;
  return Status::OK();
}

}  // namespace ps::train
