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
#include <functional>
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

// A test seam of ApplyRetention and FreeSpaceForCheckpoint; production code
// passes none.
struct RetentionHooks {
  // Called with a checkpoint directory just before it is deleted. A test
  // looks at the root there (what a kill -9 at that moment would leave), or
  // deletes the directory itself (what a concurrent call in another process
  // does).
  std::function<void(const std::string& checkpoint_dir)> before_delete;
};

// Keeps the newest `keep` complete checkpoints, the one the root's best
// marker names (checkpoint/best_marker.h), and every checkpoint they
// depend on (an incremental one's parents back to its full base); deletes
// the other complete checkpoints and every incomplete one older than the
// newest complete one (an incomplete one newer than that may be in
// progress). keep == 0 keeps everything. Returns the directories deleted.
//
// Crash-safe: checkpoints go newest first, each losing its MANIFEST (made
// durable) before its files, so a kill -9 at any moment leaves every
// checkpoint that reads as complete with its whole parent chain complete.
// Safe to run from several processes at once on one root: a checkpoint that
// another one deleted first, wholly or in part, is not an error (it is in the
// returned list all the same).
StatusOr<std::vector<std::string>> ApplyRetention(
    const std::string& root, uint32_t keep, const RetentionHooks& hooks = {});

// Frees disk space under `root` for a checkpoint whose write failed for lack
// of it: ApplyRetention(root, 1). Deletes every complete checkpoint except the
// newest complete one, the best one, their parent chains, and every incomplete
// one older than that; never the newest complete one or any of its parents, nor
// an incomplete one newer than it (in progress: the one being written, too).
// Returns the directories deleted; empty when there was nothing to free (a
// retry would fail again). Same crash and concurrency safety as
// ApplyRetention. kNotFound when `root` does not exist, kIOError naming what
// could not be listed or deleted.
StatusOr<std::vector<std::string>> FreeSpaceForCheckpoint(
    const std::string& root, const RetentionHooks& hooks = {});

}  // namespace ps::checkpoint
