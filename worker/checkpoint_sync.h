// CheckpointSync: what a trainer calls to take checkpoints at step
// boundaries and to resume from one (the servers do the storage; see
// server/checkpointer.h for the cut protocol).
//
//   auto sync = CheckpointSync::Connect(servers, worker_id).value();
//   auto info = sync->Info().value();        // once, before training
//   if (info.restored()) { start at info.restored_step() + 1, skip
//                          info.examples_consumed() examples of epoch
//                          info.epoch() }
//   for each step s:
//     ... pushes ...; client->Clock();
//     if (sync->Due(s).value())               // same answer on every worker
//       sync->Checkpoint(client, s, epoch, examples_consumed_in_epoch);
//
// Every worker must call Checkpoint at the same steps (Due makes sure).
// Training pauses for two barriers and the servers' copy of their rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "protocol/control_channel.h"
#include "protocol/ps.pb.h"
#include "worker/ps_client.h"

namespace ps::worker {

class CheckpointSync {
 public:
  static StatusOr<std::unique_ptr<CheckpointSync>> Connect(
      const std::vector<std::string>& servers, uint32_t worker_id,
      int timeout_ms = 30000);

  // The schedule and, after a restore, where this worker resumes.
  StatusOr<proto::CheckpointReply> Info();
  // Whether every worker checkpoints at `step`. A step schedule is decided
  // here; a time schedule asks shard 0, which answers all workers alike.
  StatusOr<bool> Due(uint64_t step);
  // The cut at `step` (after Clock() for it). Returns the longest copy
  // pause of the servers in ms (worker 0; 0 on the others).
  StatusOr<double> Checkpoint(PsClient* client, uint64_t step, uint64_t epoch,
                              uint64_t examples_consumed);

 private:
  CheckpointSync() = default;
  StatusOr<proto::CheckpointReply> Call(size_t shard,
                                        const proto::CheckpointRequest& r);
  uint32_t worker_id_ = 0;
  std::vector<protocol::ControlClient> servers_;
  uint64_t every_steps_ = 0, every_secs_ = 0;
};

}  // namespace ps::worker
