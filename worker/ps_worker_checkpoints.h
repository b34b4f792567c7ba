// How ps_worker takes part in the servers' cuts: the trainer's checkpoint
// callback (a checkpoint of the servers' schedule) and its eval_cut
// callback (an early-stop eval point, a checkpoint too when the servers
// keep them), both reporting how the previous checkpoint ended and
// stopping when --max_failed_checkpoints in a row failed.
//
// Thread-safety: the callbacks run on the trainer's gate thread, one at a
// time; *failing is written there and read after training.
#pragma once

#include <cstdint>
#include <functional>

#include "base/status.h"
#include "client/checkpoint_sync.h"
#include "worker/train/trainer.h"

namespace ps::worker_main {

// `sync` must outlive the callbacks; *failing is set when they stop
// training because checkpoints keep failing (exit status 4).
std::function<Status(uint64_t step, uint32_t epoch, uint64_t consumed)>
CheckpointCallback(worker::CheckpointSync* sync, uint32_t max_failed,
                   bool* failing);

decltype(train::TrainerOptions::eval_cut) EvalCutCallback(
    worker::CheckpointSync* sync, uint32_t max_failed, bool* failing);

}  // namespace ps::worker_main
