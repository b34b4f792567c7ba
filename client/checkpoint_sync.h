// CheckpointSync: what a trainer calls to take checkpoints at step
// boundaries and to resume from one (the servers do the storage; see
// server/checkpoint/checkpointer.h for the cut protocol).
//
//   auto sync = CheckpointSync::Create(client).value();  // client: PsClient*
//   auto info = sync->Info().value();        // once, before training
//   if (info.restored()) { start at info.restored_step() + 1, skip
//                          info.examples_consumed() examples of epoch
//                          info.epoch() }
//   for each step s:
//     ... pushes ...; client->Clock();
//     if (sync->Due(s).value())               // same answer on every worker
//       auto r = sync->Checkpoint(s, epoch, examples_consumed_in_epoch);
//       // r->previous_failed: the checkpoint before this one failed
//
// Early stopping (ps_worker --early_stop) adds eval points: EvalPoint at
// the same steps on every worker (every worker derives them from the same
// --eval_every and --batch_size). Every worker waits in a barrier while
// worker 0, which must be the evaluating worker, evaluates the parameters
// of exactly that step (with the servers' --checkpoint_dir, after a cut at
// that step, whose checkpoint shard 0 marks as the best when the eval is);
// worker 0 tells shard 0 its verdict before the second barrier, the others
// ask for it after (STOP_QUERY), so every worker stops after the same step.
//
// Every worker must call Checkpoint at the same steps (Due makes sure).
// Training pauses for two barriers and the servers' copy of their rows. The
// requests travel on the client's own control connections, as the worker
// that said hello there (a cut is worker 0's request only).
//
// Not thread-safe: the trainer's step thread calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status_or.h"
#include "client/ps_client.h"
#include "protocol/ps.pb.h"

namespace ps::worker {

// What one Checkpoint call found.
struct CheckpointResult {
  double copy_ms = 0;  // worker 0: the longest copy pause of the servers
  // Shard 0's account of how the checkpoint before this one ended.
  uint64_t previous_step = 0;  // 0: there was none
  bool previous_failed = false;
  std::string previous_error;
  uint32_t consecutive_failures = 0;
  uint64_t newest_complete_step = 0;  // 0: none yet
};

// What worker 0's eval at an eval point found.
struct EvalOutcome {
  bool best = false;  // the best so far: its checkpoint is kept
  bool stop = false;  // training stops after this step
  double logloss = 0, auc = 0, ne = 0;
};

class CheckpointSync {
 public:
  // `client` must outlive the CheckpointSync.
  static StatusOr<std::unique_ptr<CheckpointSync>> Create(PsClient* client);

  // The schedule and, after a restore, where this worker resumes.
  StatusOr<proto::CheckpointReply> Info();
  // Whether every worker checkpoints at `step`. A step schedule is decided
  // here; a time schedule asks shard 0, which answers all workers alike.
  StatusOr<bool> Due(uint64_t step);
  // The cut at `step` (after Clock() for it).
  StatusOr<CheckpointResult> Checkpoint(uint64_t step, uint64_t epoch,
                                        uint64_t examples_consumed);
  // An eval point at `step` (after Clock() for it); `evaluate` runs on
  // worker 0 only. With `cut` (the servers have a --checkpoint_dir) it is
  // a checkpoint too. Returns whether training stops after `step`, the
  // same on every worker; *result (may be null): the cut's account.
  StatusOr<bool> EvalPoint(
      uint64_t step, uint64_t epoch, uint64_t examples_consumed, bool cut,
      const std::function<StatusOr<EvalOutcome>()>& evaluate,
      CheckpointResult* result);
  // Whether the servers keep checkpoints (a --checkpoint_dir).
  bool servers_checkpoint() const { return servers_checkpoint_; }

 private:
  explicit CheckpointSync(PsClient* client) : client_(client) {}
  StatusOr<proto::CheckpointReply> Call(uint32_t shard,
                                        const proto::CheckpointRequest& r);
  // The cut's steps: position (with `cut`), barrier, worker 0's CUT (with
  // `cut`) and then `at_cut`, barrier.
  StatusOr<CheckpointResult> Pause(uint64_t step, uint64_t epoch,
                                   uint64_t examples_consumed, bool cut,
                                   const std::function<Status()>& at_cut);
  PsClient* const client_;
  uint64_t every_steps_ = 0, every_secs_ = 0;
  bool servers_checkpoint_ = false;
};

}  // namespace ps::worker
