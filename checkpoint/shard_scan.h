// ScanShard: reads one shard database of a checkpoint whole, with several
// reader threads over disjoint key ranges, and checks it against the
// manifest (entry count, checksum, key and value sizes, runs of rows no
// longer than recorded and not overlapping; RocksDB checks its block
// checksums).
//
// The key ranges are cut at the first keys of the database's SST files, so
// that each reader streams its own files sequentially; the ranges cover the
// whole key space, whatever the files hold (they need not be disjoint), so
// the entries seen are exactly those of one plain iteration, each once.
//
//   ScanShard(ckpt, manifest, manifest.shards(k), {.readers = 2},
//             [&](size_t range) { return sinks[range].get(); }, &bytes);
//
// Thread-safety: the sink of a range is called by one reader thread at a
// time, in key order within the range; sinks of different ranges are called
// concurrently, so they must not share mutable state without locking
// (restorer.cc gives each range its own counters and merges them after).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "checkpoint/checkpoint.pb.h"
#include "protocol/ps.pb.h"

namespace ps::checkpoint {

// A table of the shard as the scan found it in the manifest.
struct ScanTable {
  const ps::proto::TableSpec* spec = nullptr;
  const proto::ShardTableEntry* entry = nullptr;
  bool exact = false;      // EXACT (keys, last-update step) or rows
  size_t value_bytes = 0;  // of an entry of one row (EXACT: with a value)
  // HASHED/DENSE: the most rows an entry may hold (a run,
  // checkpoint/row_codec.h): the manifest's rows_per_entry, at least 1.
  uint64_t max_run_rows = 1;
};

// Receives the entries of one key range, in key order: `rows` rows from row
// (or EXACT key) `id` on, laid out as checkpoint/row_codec.h says, its size
// checked against the table's manifest entry (rows * value_bytes; EXACT: one
// row, or a tombstone with an empty value). `value` points into RocksDB's
// block and is valid only during the call.
class EntrySink {
 public:
  virtual ~EntrySink() = default;
  virtual Status Add(const ScanTable& table, uint64_t id, uint64_t rows,
                     std::string_view value) = 0;
  // An entry of the table's rows on disk (ShardTableEntry.disk_tier_path):
  // one row, never a tombstone. By default the same as Add.
  virtual Status AddFromDisk(const ScanTable& table, uint64_t id,
                             std::string_view value) {
    return Add(table, id, 1, value);
  }
};

struct ScanOptions {
  int readers = 1;  // threads reading key ranges at the same time (>= 1)
  // Mapped files, or blocks copied into buffers (checkpoint/
  // rocksdb_options.h: FileReads).
  bool mapped = true;
};

// Called once per key range, in key order (range 0 holds the smallest
// keys), on the calling thread before any reader starts. nullptr: the
// range's entries are only checked (verification).
using SinkFactory = std::function<EntrySink*(size_t range)>;

// Scans `shard` of the checkpoint at `checkpoint_path` (its directory under
// it named by shard.path()). kCorruption naming the checkpoint, shard and
// directory on a missing or unreadable database, a malformed key or value,
// an unlisted table, or a count or checksum that differs from the manifest;
// the error a sink returns stops the scan and is returned. Of several
// ranges that fail, the error of the first in key order is reported.
// Adds the key and value bytes scanned to *bytes_read.
Status ScanShard(const std::string& checkpoint_path, const proto::Manifest& m,
                 const proto::ShardEntry& shard, const ScanOptions& options,
                 const SinkFactory& make_sink, uint64_t* bytes_read);

}  // namespace ps::checkpoint
