// Checkpointer: the server's side of checkpoints (checkpoint/ does the
// storage).
//
// The cut: workers coordinate it at a step boundary through the control
// protocol (proto::CheckpointRequest; worker/checkpoint_sync.h drives it):
// every worker waits until its pushes are applied, reports its data
// position to shard 0 and enters a barrier; worker 0 sends CUT to every
// server; a second barrier releases the workers. While they wait nothing is
// pushed, so each server's copy of its rows is a consistent cut at that
// step. Training pauses for the copy (a memcpy of rows and optimizer state,
// reported as cut_pause_ms), not for the disk: a background thread writes
// the copy (checkpoint/shard_writer.h), and shard 0 commits the MANIFEST
// once every shard's part is on disk, then prunes old checkpoints.
//
// Incremental checkpoints find the changed rows by comparing the new copy
// with the previous one, kept in memory, in the background thread: nothing
// on the apply path (no dirty bits to set per row), at the price of one more
// copy of the shard's rows in memory. Every `full_every`-th checkpoint is
// full (and the first after a start); EXACT tables are always saved whole.
//
// Restore (--restore_from=latest|PATH) runs before the server takes
// requests: rows, optimizer state and step counts of every table, EXACT keys
// with their last-update steps; onto any number of shards.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "checkpoint/shard_snapshot.h"
#include "protocol/ps.pb.h"
#include "server/shard.h"

namespace ps::server {

struct CheckpointOptions {
  std::string dir;           // empty: no checkpoints are written
  uint64_t every_steps = 0;  // workers cut at steps that are multiples
  uint64_t every_secs = 0;   // or at the first step this long after the last
  uint32_t keep = 3;         // complete checkpoints kept (0: all)
  uint32_t full_every = 5;   // every Nth checkpoint is full
  std::string restore_from;  // "", "latest" (under dir) or a checkpoint path
  bool restore_fallback = false;
  bool final_on_stop = true;  // a last checkpoint after draining on stop
  uint32_t commit_wait_secs = 600;
  int write_threads = 2;
  // Tests (--test_hold_checkpoint_step): the background write of this step
  // stops half-way (SST files written, not ingested, no .done) after
  // logging "test hold: checkpoint step S shard K", until the server stops
  // or 60 s pass, so that a test can kill -9 the server mid-write.
  uint64_t test_hold_step = 0;
};

// kInvalidArgument naming the flag at fault.
Status ValidateCheckpointOptions(const CheckpointOptions& o);

class Checkpointer {
 public:
  Checkpointer(CheckpointOptions options, Shard* shard);
  ~Checkpointer();  // waits for the background write
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Restores the shard as --restore_from says (nothing when empty). Call
  // before the shard serves anyone. Logs what was restored.
  Status Restore();

  // Answers a control request (any thread).
  StatusOr<proto::CheckpointReply> Handle(const proto::CheckpointRequest& r);

  // After the inboxes are drained on stop: a final checkpoint if
  // configured, then waits for every background write and commit.
  void Finish();

  // Cut the shard at `step` now (what CUT does). Waits for the previous
  // checkpoint's write first. Returns the copy's duration in ms.
  StatusOr<double> Cut(uint64_t step, bool with_positions);
  // Blocks until the background writes are done (tests).
  void WaitIdle();

 private:
  struct Job {
    checkpoint::ShardSnapshot snapshot;
    std::vector<checkpoint::proto::WorkerPosition> positions;
    double pause_ms = 0;
  };
  checkpoint::ShardSnapshot Copy() const;
  // Removes this shard's part of every interrupted checkpoint (no
  // MANIFEST) under the directory: it belongs to an earlier life of this
  // server and must not be committed by shard 0 as if it were new.
  void RemoveInterruptedParts();
  void WriterLoop();
  void Write(Job job);

  const CheckpointOptions options_;
  Shard* const shard_;

  std::mutex cut_mu_;  // one cut at a time

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  bool writing_ = false;   // guarded by mu_
  bool stop_ = false;      // guarded by mu_
  // Shard 0: positions reported per step, DUE decisions per step.
  std::map<uint64_t, std::map<uint32_t, checkpoint::proto::WorkerPosition>>
      positions_;
  std::map<uint64_t, bool> due_;
  std::chrono::steady_clock::time_point last_cut_time_;
  uint64_t last_cut_step_ = 0;  // guarded by mu_
  bool restored_ = false;
  checkpoint::proto::Manifest restored_manifest_;
  std::string restored_from_;

  // Writer thread only: the previous checkpoint's copy (the baseline of the
  // next incremental one) and how many checkpoints were written.
  std::optional<checkpoint::ShardSnapshot> previous_;
  uint64_t written_ = 0;
  std::thread writer_;
};

}  // namespace ps::server
