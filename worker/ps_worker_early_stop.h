// ps_worker's early stopping (--early_stop, --early_stop_patience): the
// flags' checks, the trainer's options for them with --local (the best
// parameters kept in this process's memory) or with servers (eval points
// through the servers' cuts, the best checkpoint kept by them), and what
// is printed at the end.
//
// With servers every worker of the job needs the same --early_stop,
// --eval_every and --batch_size (the eval points are steps every worker
// derives from them), and worker 0 evaluates (--eval_worker=0, the
// default): it drives the cut, so its eval sees exactly the cut's
// parameters, and the others learn its verdict from shard 0.
//
// Thread-safety: called from main's thread only.
#pragma once

#include "base/status.h"
#include "client/checkpoint_sync.h"
#include "worker/train/local_param_store.h"
#include "worker/train/trainer.h"

namespace ps::worker_main {

// The flags on their own (before anything is opened): kInvalidArgument
// naming the flag (exit 2).
Status CheckEarlyStopFlags(bool local);
// The trainer's early-stop options; `to` already has its batch size.
void ConfigureEarlyStop(train::TrainerOptions* to);
// --local: the best parameters copied aside in `store`.
void ConfigureLocalEarlyStop(train::LocalParamStore* store,
                             train::TrainerOptions* to);
// Servers: warns at start when they keep no checkpoints (the parameters
// they end with are the latest, not the best).
void ConfigureServerEarlyStop(const worker::CheckpointSync& sync,
                              train::TrainerOptions* to);
// The best point after training, and where its parameters are.
void PrintEarlyStopResult(const train::TrainResult& r, bool local,
                          bool servers_checkpoint);

}  // namespace ps::worker_main
