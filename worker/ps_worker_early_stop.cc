#include "worker/ps_worker_early_stop.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>

DEFINE_bool(early_stop, false,
            "Stop training once --early_stop_patience evaluations in a row "
            "gave no better eval logloss, and keep the best parameters: "
            "--local keeps a copy in memory and ends with the eval of the "
            "best; servers with a --checkpoint_dir keep the best point's "
            "checkpoint, exempt from --checkpoint_keep (ps_server "
            "--restore_from=best brings it back). Needs --eval_every: the "
            "evaluations are step boundaries where every worker pauses "
            "(every ceil(eval_every / this worker's batch) steps, instead "
            "of after each epoch; every worker needs the same flags) and "
            "worker 0 evaluates; the "
            "others wait for it, at most --timeout_ms, so raise that for "
            "an eval set that takes longer to score.");
DEFINE_uint32(early_stop_patience, 2,
              "With --early_stop: evaluations in a row without a new best "
              "eval logloss before training stops, >= 1. 2 rides out one "
              "noisy evaluation without training far past the best.");
DECLARE_uint64(eval_every);
DECLARE_int32(eval_worker);

namespace ps::worker_main {

Status CheckEarlyStopFlags(bool local) {
  if (FLAGS_early_stop_patience == 0) {
    return InvalidArgument(
        "--early_stop_patience must be >= 1 (evaluations without a new best "
        "before stopping), not 0");
  }
  if (!FLAGS_early_stop) return Status::OK();
  if (FLAGS_eval_every == 0) {
    return InvalidArgument(
        "--early_stop needs --eval_every > 0: it stops on evaluations every "
        "that many training examples");
  }
  if (!local && FLAGS_eval_worker != 0) {
    return InvalidArgument(
        "--early_stop with servers needs --eval_worker=0 (worker 0 drives "
        "the servers' cut its evaluation must see), not " +
        std::to_string(FLAGS_eval_worker));
  }
  return Status::OK();
}

void ConfigureEarlyStop(train::TrainerOptions* to) {
  if (!FLAGS_early_stop) return;
  to->early_stop = true;
  to->early_stop_patience = FLAGS_early_stop_patience;
  to->eval_steps = (FLAGS_eval_every + to->batch_size - 1) / to->batch_size;
  LOG(INFO) << "early stop: an evaluation every " << to->eval_steps
            << " steps (" << to->eval_steps * to->batch_size
            << " examples of this worker), stopping after "
            << to->early_stop_patience << " without a better eval logloss";
}

void ConfigureLocalEarlyStop(train::LocalParamStore* store,
                             train::TrainerOptions* to) {
  if (!to->early_stop) return;
  to->keep_best = [store] { return store->KeepCopy(); };
  to->restore_best = [store] { return store->RestoreCopy(); };
}

void ConfigureServerEarlyStop(const worker::CheckpointSync& sync,
                              train::TrainerOptions* to) {
  if (!to->early_stop || sync.servers_checkpoint()) return;
  LOG(WARNING) << "--early_stop: the servers keep no checkpoints (no "
                  "--checkpoint_dir): training stops at the best point's "
                  "patience and reports it, but the parameters the servers "
                  "hold then are the LATEST, not the best";
}

void PrintEarlyStopResult(const train::TrainResult& r, bool local,
                          bool servers_checkpoint) {
  if (!r.has_best) return;
  const train::EvalPoint& b = r.best;
  const std::string at =
      b.step > 0 ? "step " + std::to_string(b.step) : "the end of training";
  std::printf("%s; best eval at %s (%llu examples): %s\n",
              r.early_stopped ? "early stop" : "no early stop", at.c_str(),
              static_cast<unsigned long long>(b.trained_examples),
              train::EvalMetricsText(b).c_str());
  if (local) return;
  if (b.step == 0) {
    std::printf("the best are the final parameters, which the servers hold\n");
    return;
  }
  if (servers_checkpoint) {
    std::printf(
        "the servers hold the latest parameters; the best are in their "
        "checkpoint of step %llu (ps_server --restore_from=best)\n",
        static_cast<unsigned long long>(b.step));
  } else {
    std::printf(
        "the servers hold the latest parameters, not the best (they keep no "
        "checkpoints: give them a --checkpoint_dir)\n");
  }
}

}  // namespace ps::worker_main
