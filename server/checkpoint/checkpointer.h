// Checkpointer: the server's side of checkpoints (checkpoint/ does the
// storage).
//
// The cut: workers coordinate it at a step boundary through the control
// protocol (proto::CheckpointRequest; client/checkpoint_sync.h drives
// it): every worker waits until its pushes are applied, reports its data
// position to shard 0 and enters a barrier; worker 0 sends CUT to every
// server; a second barrier releases the workers. While they wait nothing is
// pushed, so each server's copy of its rows is a consistent cut at that
// step. Training pauses for the copy (a memcpy of rows and optimizer state,
// reported as cut_pause_ms), not for the disk: a background thread writes
// the copy (checkpoint/shard_writer.h), and shard 0 commits the MANIFEST
// once every shard's part is on disk, then prunes old checkpoints.
//
// A checkpoint that cannot complete is abandoned, never waited on for long:
// while shard 0 waits for a part it asks that shard (server/peer_registry.h)
// how its part stands, and gives up, logs why and deletes the checkpoint's
// directory when the shard is down (its port refuses: at once), silent for
// --timeout_ms, reports a failed write, restarted, or never got the cut
// within --timeout_ms. The next POSITION (every worker, at the next
// checkpoint) tells the workers how the previous checkpoint ended, so they
// warn and can stop when checkpoints keep failing.
//
// A write that fails for lack of space frees space by retention (keeping
// the newest complete checkpoint and its parents) and is tried once more; a
// failed write leaves nothing behind.
//
// Incremental checkpoints find the changed rows by comparing the new copy
// with the previous one, kept in memory, in the background thread: nothing
// on the apply path (no dirty bits to set per row), at the price of one more
// copy of the shard's rows in memory. A checkpoint is incremental only when
// that previous copy is of a complete checkpoint (committed, not abandoned)
// whose chain is shorter than `full_every`; every shard decides alike from
// the folder, so after a failed or abandoned checkpoint all of them write a
// full one.
// EXACT tables are always saved whole.
//
// Early stopping (ps_worker --early_stop): at an eval point every worker
// takes part in a cut as for a checkpoint, and worker 0 (the evaluating
// worker) evaluates between the two barriers, on the parameters of exactly
// that cut, and tells shard 0 (EVALUATED) whether it is the best so far and
// whether training stops; the other workers ask (STOP_QUERY) after the
// second barrier. Shard 0 marks the best one's checkpoint in <root>/BEST
// once it is complete (checkpoint/best_marker.h): retention keeps it and
// its parents until a newer best replaces the mark. The verdict lives only
// in shard 0's memory (a restarted shard 0 forgets a pending mark).
//
// Restore (--restore_from=latest|best|PATH; best: the one <root>/BEST
// names) runs before the server takes
// requests: rows, optimizer state and step counts of every table, EXACT keys
// with their last-update steps; onto any number of shards. All shards
// restore the same checkpoint or none starts: each loads its part of a
// candidate, then asks every other shard for its verdict on it; one failure
// sends all of them to the previous candidate (with --restore_fallback) or
// makes all of them fail.
//
// Thread-safe: Handle is called by the control connections' threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "base/status.h"
#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_snapshot.h"
#include "protocol/ps.pb.h"
#include "server/peer_registry.h"
#include "server/shard.h"

namespace ps::server {

struct CheckpointOptions {
  std::string dir;           // empty: no checkpoints are written
  uint64_t every_steps = 0;  // workers cut at steps that are multiples
  uint64_t every_secs = 0;   // or at the first step this long after the last
  uint32_t keep = 3;         // complete checkpoints kept (0: all)
  uint32_t full_every = 5;   // every Nth checkpoint is full
  // "", "latest" or "best" (under dir) or a checkpoint path
  std::string restore_from;
  bool restore_fallback = false;
  bool final_on_stop = true;  // a last checkpoint after draining on stop
  // A shard silent this long is lost (and a shard that has not received a
  // cut this long after shard 0 did never will).
  int timeout_ms = 30000;
  // Restoring: how long to wait for the other shards to start and answer.
  uint32_t restore_wait_secs = 300;
  int write_threads = 2;
  // Tests (--test_hold_checkpoint_step): the background write of this step
  // stops half-way (SST files written, not ingested, no .done) after
  // logging "test hold: checkpoint step S shard K", until the server is
  // asked to stop or 60 s pass, so that a test can kill -9 it mid-write.
  uint64_t test_hold_step = 0;
};

// kInvalidArgument naming the flag at fault.
Status ValidateCheckpointOptions(const CheckpointOptions& o);

class Checkpointer {
 public:
  // `peers` (null without a checkpoint folder) reaches the other shards;
  // `instance` names this server's life in PART and RESTORE answers.
  Checkpointer(CheckpointOptions options, Shard* shard, PeerRegistry* peers,
               uint64_t instance);
  ~Checkpointer();  // waits for the background write
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Restores the shard as --restore_from says (nothing when empty), agreed
  // with every other shard. Call before the shard serves workers (the
  // control service must already answer RESTORE requests of the other
  // shards). Logs what was restored.
  Status Restore();

  // Answers a control request (any thread). `worker_id` is the worker that
  // said hello on the connection, -1 for none (a peer server, a tool).
  StatusOr<proto::CheckpointReply> Handle(const proto::CheckpointRequest& r,
                                          int64_t worker_id);

  // The server is stopping: requests that wait (CUT, POSITION) return
  // kCancelled, and waiting for other shards' parts gives up on any shard
  // that does not answer at once. A write in progress goes on.
  void BeginStop();
  // A second stop request: also the final checkpoint's waits give up.
  void Abort();
  // After the inboxes are drained on stop: a final checkpoint if
  // configured, then waits for every background write and commit.
  void Finish();

  // Cut the shard at `step` now (what CUT does). Waits for the previous
  // checkpoint's write first. Returns the copy's duration in ms.
  StatusOr<double> Cut(uint64_t step, bool with_positions);
  // Blocks until the background writes are done (tests).
  void WaitIdle();

  // For the status request (ps_ctl status): this shard's newest cut (0:
  // none) and the step restored at start (0: none). Any thread.
  struct Progress {
    uint64_t last_cut_step = 0;
    uint64_t restored_step = 0;
  };
  Progress progress() const;

  // This shard's parts written so far (for metrics; relaxed atomics, any
  // thread reads): how many, and the last one's step, bytes, cut pause,
  // write time and when it was written (Unix seconds, 0: none yet). Shard
  // 0 also records when it last committed a checkpoint, the one time that
  // says a complete checkpoint exists (a part alone may be abandoned).
  struct PartStats {
    std::atomic<uint64_t> written{0};
    std::atomic<uint64_t> failed{0};
    std::atomic<uint64_t> last_step{0};
    std::atomic<uint64_t> last_bytes{0};
    std::atomic<double> last_pause_seconds{0};
    std::atomic<double> last_write_seconds{0};
    std::atomic<double> last_time_seconds{0};
    std::atomic<double> last_complete_time_seconds{0};
  };
  const PartStats& part_stats() const { return part_stats_; }

 private:
  struct Job {
    checkpoint::ShardSnapshot snapshot;
    std::vector<checkpoint::proto::WorkerPosition> positions;
    double pause_ms = 0;
  };
  // One shard's part of one checkpoint, as PART reports it.
  struct Part {
    proto::CheckpointReply::PartState state = proto::CheckpointReply::NOT_CUT;
    std::string error;
  };
  // How checkpoints have been ending (shard 0), as POSITION reports it.
  struct Outcomes {
    uint64_t last_step = 0;
    bool last_failed = false;
    std::string last_error;
    uint32_t consecutive_failures = 0;
    uint64_t newest_complete_step = 0;
  };

  StatusOr<checkpoint::ShardSnapshot> Copy() const;
  // Removes this shard's part of every interrupted checkpoint (no
  // MANIFEST) under the directory: it belongs to an earlier life of this
  // server and must not be committed by shard 0 as if it were new.
  void RemoveInterruptedParts();
  // Loads this shard's part of `path` into the tables (EXACT tables
  // emptied first, so that a later candidate starts clean).
  StatusOr<checkpoint::RestoreResult> RestoreFrom(const std::string& path);
  // Waits for every other shard's verdict on the checkpoint of `step`: OK
  // when all restored it.
  Status AgreeOnRestore(uint64_t step);
  void SetVerdict(uint64_t step, const Status& verdict);
  // A shard that restores nothing stays until every other shard heard its
  // verdicts or restores nothing either (or --restore_wait_secs passed), so
  // that none waits for it in vain. `last_step`: its last candidate.
  void LingerUntilHeard(uint64_t last_step);
  StatusOr<double> CutLocked(uint64_t step, bool with_positions,
                             bool final_checkpoint);
  void WriterLoop();
  void Write(Job job);
  // Whether the next write may be incremental on previous_.
  bool IncrementalPossible();
  // Shard 0: waits until every shard's shard-<k>.done is in `dir`, or why
  // the checkpoint cannot complete.
  Status AwaitParts(uint64_t step, const std::string& dir);
  void SetPart(uint64_t step, proto::CheckpointReply::PartState state,
               std::string error = "");
  // Shard 0: records how the checkpoint of `step` ended.
  void Settle(uint64_t step, const Status& outcome);
  // Shard 0: the EVALUATED request (checkpointer_best.cc).
  StatusOr<proto::CheckpointReply> Evaluated(const proto::CheckpointRequest& r,
                                             int64_t worker_id);
  // Shard 0: writes the pending best mark once its checkpoint is complete
  // (called on EVALUATED and after each commit); drops it when `abandoned`
  // is its step.
  void MarkBestIfComplete(uint64_t abandoned = 0);
  bool stopping() const;

  const CheckpointOptions options_;
  Shard* const shard_;
  PeerRegistry* const peers_;
  const uint64_t instance_;
  PartStats part_stats_;

  std::mutex cut_mu_;  // one cut at a time

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  bool writing_ = false;   // guarded by mu_
  bool stop_ = false;      // guarded by mu_: the writer thread ends
  bool stopping_ = false;  // guarded by mu_: BeginStop
  bool aborted_ = false;   // guarded by mu_: Abort
  // Shard 0: positions reported per step, DUE decisions per step.
  std::map<uint64_t, std::map<uint32_t, checkpoint::proto::WorkerPosition>>
      positions_;
  std::map<uint64_t, bool> due_;
  std::chrono::steady_clock::time_point last_cut_time_;
  uint64_t last_cut_step_ = 0;      // guarded by mu_
  std::map<uint64_t, Part> parts_;  // guarded by mu_, newest few
  Outcomes outcomes_;               // guarded by mu_ (shard 0)
  // Shard 0, early stopping: the best eval point's mark waiting for its
  // checkpoint to complete (step 0: none), and the step after which
  // training stops (0: it goes on). Guarded by mu_.
  checkpoint::proto::BestMarker pending_best_;
  uint64_t stop_step_ = 0;
  std::mutex mark_mu_;  // one writer of <root>/BEST at a time
  // Restore verdicts of this shard by step (RESTORE answers), and which
  // shards asked for one.
  std::map<uint64_t, proto::CheckpointReply> verdicts_;  // guarded by mu_
  std::set<std::pair<uint32_t, uint64_t>> askers_;       // (shard, step), mu_
  // (shard, step) that answered NOT_RESTORED: they need no verdict of ours.
  std::set<std::pair<uint32_t, uint64_t>> known_not_restored_;  // mu_
  bool restored_ = false;
  checkpoint::proto::Manifest restored_manifest_;
  std::string restored_from_;

  // Writer thread only: the previous checkpoint's copy (the baseline of the
  // next incremental one).
  std::optional<checkpoint::ShardSnapshot> previous_;
  std::thread writer_;
};

}  // namespace ps::server
