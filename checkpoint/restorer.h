// Reading checkpoints back: restore a shard (onto the same or a different
// number of shards), verify a checkpoint, pick the latest complete one.
//
//   RestoreTarget target;  target.shard_id = 1;  target.num_shards = 3;
//   target.tables.push_back({.spec = emb, .first_row = ..., .rows = ...,
//                            .values = rows_ptr, .state = {m, v}});
//   auto result = RestoreLatest("/ckpt", {.fallback = true}, &target);
//
// Resharding: a HASHED/DENSE table's rows are range-partitioned, so new
// shard j reads only the old shards whose ranges overlap its own; EXACT keys
// are spread by hash, so every old shard holding the table is read and the
// keys new shard j owns (ShardMap::ShardOfKey under the new layout) kept.
//
// An incremental checkpoint is restored by applying its chain, full base
// first, then each increment in order (per table: from the last checkpoint
// where that table is full).
//
// Verification: every old shard database read is scanned whole (by several
// reader threads, checkpoint/shard_scan.h), its entry
// count and checksum compared with the manifest, and RocksDB checks its
// block checksums: a flipped byte surfaces as kCorruption naming the shard
// directory (and RocksDB's message names the file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "checkpoint/layout.h"
#include "checkpoint/shard_snapshot.h"
#include "kernels/optimizers.h"
#include "protocol/ps.pb.h"

namespace ps::checkpoint {

// The table's part (table/table_snapshot.h).
using TableTarget = table::TableTarget;

struct RestoreTarget {
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  // Threads reading one old shard's database at a time, each over the key
  // range of some of its SST files (checkpoint/shard_scan.h); 0: one per
  // hardware thread, at most 8. The rows restored do not depend on it.
  int readers = 0;
  std::vector<TableTarget> tables;
};

struct RestoreResult {
  std::string path;  // the checkpoint restored (last of the chain)
  proto::Manifest manifest;
  std::vector<std::string> chain;  // base first
  uint64_t bytes_read = 0;         // value and key bytes scanned
  // Checkpoints tried before this one, and why they failed (fallback).
  std::vector<std::string> skipped;
};

// The chain of `checkpoint_path`: its full base first, ending with it.
// kNotFound / kCorruption naming the missing or damaged link.
StatusOr<std::vector<CheckpointInfo>> ResolveChain(
    const std::string& checkpoint_path);

StatusOr<RestoreResult> RestoreShard(const std::string& checkpoint_path,
                                     RestoreTarget* target);

struct RestoreLatestOptions {
  // On a damaged or unreadable latest checkpoint, try the previous complete
  // ones (newest first) instead of failing.
  bool fallback = false;
};
// kNotFound when `root` holds no complete checkpoint.
StatusOr<RestoreResult> RestoreLatest(const std::string& root,
                                      const RestoreLatestOptions& options,
                                      RestoreTarget* target);

// Scans every shard of the checkpoint (not its parents; they are checked to
// exist and read intact): entry counts, checksums, value sizes. Returns the
// manifest; kCorruption naming the shard and file at fault.
StatusOr<proto::Manifest> VerifyCheckpoint(const std::string& checkpoint_path);

}  // namespace ps::checkpoint
