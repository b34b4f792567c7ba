// CheckpointFollower: keeps a serving replica's tables at the newest
// complete checkpoint under a training cluster's checkpoint root, which it
// only reads.
//
//   CheckpointFollower follower({.root = "/ckpt", .shards = {}});
//   for (;;) { auto r = follower.Poll(); ...; sleep(poll interval); }
//   auto tables = follower.tables();   // lookups: tables->Lookup(...)
//
// Each Poll lists the root and, when a complete checkpoint newer than the
// served one is there, brings the tables to it:
//   - the first: loaded whole (nothing is served before it);
//   - an increment of the served one (the served checkpoint is in its chain
//     and every later link holds only changed rows): those rows are staged
//     and applied;
//   - anything else (a full checkpoint, a chain that does not pass through
//     the served one): its chain is read whole and compared with the served
//     rows; only the rows that differ (and EXACT keys that lost their row)
//     are staged and applied;
//   - a checkpoint of another layout (tables or number of shards changed):
//     loaded into new tables, which replace the old at once (the one case
//     that holds two copies).
// Staged changes switch in atomically (serving/served_tables.h): a lookup
// sees the old checkpoint's rows or the new one's. Memory beyond the tables:
// the staged rows; a full read also marks the EXACT rows it saw (a byte
// each). Files are read into buffers, not mapped, so that a checkpoint read
// whole does not count in the replica's resident memory.
//
// Never writes the root and holds nothing there: a checkpoint the training
// cluster prunes while it is read fails that Poll (its files vanish), which
// is like any checkpoint that cannot be applied: skipped, with the reason
// returned for the log, never tried again, and the served one stays. The
// follower only moves forward (a checkpoint of a lower step than the served
// one is not taken).
//
// Thread-safety: Poll from one thread at a time; tables() from any.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "checkpoint/layout.h"
#include "serving/served_tables.h"

namespace ps::serving {

// How a Poll brought the tables to a checkpoint.
enum class FollowAction {
  kNone,         // nothing newer (or only checkpoints that failed before)
  kLoaded,       // read whole into new tables
  kIncremental,  // the increments after the served checkpoint applied
  kCompared,     // read whole, the differing rows applied
};
const char* FollowActionName(FollowAction a);

class CheckpointFollower {
 public:
  struct Options {
    std::string root;              // the training cluster's --checkpoint_dir
    std::vector<uint32_t> shards;  // held (empty: all)
    // Where tiered tables keep rows beyond memory: each set of tables
    // loaded gets a folder tables-N in disk_tier.dir (those a killed
    // replica left are removed at the first Poll).
    DiskTier disk_tier;
    // Rows per tiered table that each Poll brings into memory from those
    // lookups read from disk twice (ServedTables::Promote).
    size_t promote_per_poll = 8192;
  };
  explicit CheckpointFollower(Options options);

  struct PollResult {
    FollowAction action = FollowAction::kNone;
    ServedCheckpoint served;     // after the poll (empty name: none)
    ServedCheckpoint newest;     // the newest complete one under the root
    uint64_t rows_changed = 0;   // staged and applied (or loaded)
    double apply_seconds = 0;    // reading, staging and switching
    uint64_t rows_promoted = 0;  // tiered tables: disk to memory
  };
  // One look at the root (see above), then the promotions of tiered
  // tables. An error: the root cannot be listed, the newest checkpoint was
  // skipped (the message names it and why), or a promotion failed; the
  // served checkpoint is unchanged either way.
  StatusOr<PollResult> Poll();

  // The tables lookups read (nullptr before the first load).
  std::shared_ptr<const ServedTables> tables() const;

 private:
  Status Bring(const checkpoint::CheckpointInfo& newest, PollResult* r);
  StatusOr<std::unique_ptr<ServedTables>> Load(
      const checkpoint::CheckpointInfo& c, uint64_t* rows);
  Status ApplyIncrements(const std::vector<checkpoint::CheckpointInfo>& links,
                         const ServedCheckpoint& to, uint64_t* rows);
  Status ApplyDifferences(const checkpoint::CheckpointInfo& c, uint64_t* rows);

  const Options options_;
  std::set<std::string> skipped_;  // checkpoints that failed: not retried
  uint64_t loads_ = 0;             // sets of tables loaded (folder names)
  mutable std::mutex mu_;
  std::shared_ptr<ServedTables> tables_;  // guarded by mu_ (the pointer)
};

// The served identity of a listed checkpoint.
ServedCheckpoint ServedCheckpointOf(const checkpoint::CheckpointInfo& c);

}  // namespace ps::serving
