// Completing checkpoints and pruning old ones.
//
// CommitCheckpoint is called by one party (shard 0's server, or a test that
// wrote every shard itself) once the cut is taken: it waits for every
// shard's shard-<k>.done, checks that they agree (same kind and parent, one
// per shard), and writes the MANIFEST last, atomically. Until then the
// checkpoint does not exist for any reader.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "protocol/ps.pb.h"

namespace ps::checkpoint {

struct CommitRequest {
  std::string checkpoint_dir;  // <root>/ckpt-<step>
  uint64_t step = 0;
  uint32_t num_shards = 1;
  std::vector<ps::proto::TableSpec> tables;
  std::vector<proto::WorkerPosition> workers;
  // How long to wait for the other shards' .done files.
  std::chrono::milliseconds wait{0};
};

// kTimeout when a shard's .done did not appear in time (naming the shards
// missing), kCorruption when the shards disagree; the checkpoint stays
// incomplete then.
StatusOr<proto::Manifest> CommitCheckpoint(const CommitRequest& request);

// Keeps the newest `keep` complete checkpoints and every checkpoint they
// depend on (an incremental one's parents back to its full base); deletes
// the other complete checkpoints and every incomplete one older than the
// newest complete one (an incomplete one newer than that may be in
// progress). keep == 0 keeps everything. Returns the directories deleted.
StatusOr<std::vector<std::string>> ApplyRetention(const std::string& root,
                                                  uint32_t keep);

}  // namespace ps::checkpoint
