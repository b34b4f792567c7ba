// WriteShard: saves one shard's snapshot as a RocksDB database and records
// what was written (entries, bytes, checksum) in <checkpoint>/shard-<k>.done.
// The checkpoint is not complete until CommitCheckpoint
// (checkpoint/committer.h) has written the MANIFEST.
//
//   ShardWriteOptions o;  o.kind = proto::FULL;
//   auto entry = WriteShard("/ckpt/ckpt-000000000100", snapshot, o);
//
// How it writes: see checkpoint/rocksdb_options.h (sorted SST files written
// in parallel, then ingested). An EXACT table's rows on disk (a disk tier,
// TableSnapshot::uncopied) are not written: the tier's files as they were
// at the cut are placed beside the database as shard-<k>.disk-<table>/
// (hard links; on another file system, linked from an earlier checkpoint's
// copy of the same file, or copied), and read once for the entries and
// checksum the manifest records. Its rows in memory, when the cut wrote
// them to a file (TableSnapshot::spilled), are read back from there in key
// order and written as copied rows are.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "checkpoint/shard_snapshot.h"

namespace ps::checkpoint {

struct ShardWriteOptions {
  proto::Kind kind = proto::FULL;
  std::string parent;  // INCREMENTAL: the parent's directory name
  int threads = 2;     // SST files written at the same time
  uint64_t target_file_bytes = 128ull << 20;
  // HASHED/DENSE: the most rows one entry holds (a run of consecutive rows,
  // checkpoint/row_codec.h). 0: RowsPerRun, values of about kRunTargetBytes;
  // 1: one row per entry, as format 1 wrote (tests).
  uint64_t max_rows_per_entry = 0;
  double cut_pause_ms = 0;  // recorded in the ShardEntry
  // Tests: called once the SST files are written, before they are ingested
  // and shard-<k>.done is written (a kill -9 there leaves a half-written
  // shard).
  std::function<void()> after_files;
};

// Creates <checkpoint_dir> if needed, replaces a leftover shard-<k>/ of an
// interrupted attempt, writes the database, then shard-<k>.done. kIOError or
// kInvalidArgument (a snapshot that does not match its spec), naming the
// table and path. A failed write (a full disk, say) leaves nothing of the
// shard behind: shard-<k>/, shard-<k>.sst-tmp/, shard-<k>.disk-*/,
// shard-<k>.done and its .tmp are removed before the error returns, so the
// space is free for a retry.
StatusOr<proto::ShardEntry> WriteShard(const std::string& checkpoint_dir,
                                       const ShardSnapshot& snapshot,
                                       const ShardWriteOptions& options);

// Removes everything WriteShard makes for shard `shard` in `checkpoint_dir`
// (its database, the SST staging folder, its tables' rows on disk,
// shard-<k>.done and its temp file),
// the .done first; what is already gone is not an error. kIOError naming
// what could not be deleted.
Status RemoveShardPart(const std::string& checkpoint_dir, uint32_t shard);

}  // namespace ps::checkpoint
