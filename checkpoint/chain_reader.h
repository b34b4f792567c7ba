// ChainReader: the rows a checkpoint leaves once its chain is applied (its
// full base, then each increment in order; tombstones drop EXACT keys),
// streamed shard by shard to a sink, as a restore would hold them, without
// holding a table in memory. Values only: optimizer state and EXACT
// last-update steps are skipped.
//
//   auto reader = ChainReader::Open(path, {}).value();   // every table
//   for (uint32_t k = 0; k < reader.manifest().num_shards(); ++k)
//     reader.ReadShard(k, /*readers=*/2, &sink);
//
// Memory: the changed rows of one shard's increments (HASHED/DENSE:
// values; EXACT: whole entries); the full base streams. Each shard read is
// checked as a restore checks it (entry counts, checksums, value sizes,
// RocksDB block checksums), and a HASHED/DENSE base must hold every row of
// the shard.
//
// Users: ps_ckpt export (checkpoint/exporter.h), serving replicas
// (serving/checkpoint_follower.h).
//
// Thread-safety: one ReadShard at a time per reader; the sink's calls are
// described below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "checkpoint/layout.h"
#include "checkpoint/shard_scan.h"
#include "protocol/ps.pb.h"

namespace ps::checkpoint {

class ChainRowSink {
 public:
  virtual ~ChainRowSink() = default;
  // HASHED/DENSE: `rows` rows from global row `first` on, their values
  // (rows x dim floats, not necessarily 4-byte aligned). A shard's base
  // comes first, from several reader threads at once (disjoint rows); then
  // the rows its increments changed, from the calling thread, in chain
  // order: they replace what came before.
  virtual Status Rows(const ps::proto::TableSpec& spec, uint64_t first,
                      uint64_t rows, const char* values) = 0;
  // EXACT: a key that has a row, and the row's values (dim floats, not
  // necessarily aligned); once per key, in ascending key order within a
  // shard, from one thread.
  virtual Status Key(const ps::proto::TableSpec& spec, uint64_t key,
                     const char* values) = 0;
};

class ChainReader {
 public:
  // The chain of `checkpoint_path` (ResolveChain: kNotFound, kCorruption)
  // and the tables named (empty: all); kInvalidArgument for a name the
  // checkpoint does not hold (the message lists those it has), kCorruption
  // for a table that is full in no link of the chain.
  static StatusOr<std::unique_ptr<ChainReader>> Open(
      const std::string& checkpoint_path,
      const std::vector<std::string>& table_names);
  ~ChainReader();

  const std::vector<CheckpointInfo>& chain() const { return chain_; }
  const proto::Manifest& manifest() const { return chain_.back().manifest; }
  // The tables read, in the manifest's order.
  std::vector<const ps::proto::TableSpec*> tables() const;

  // Streams shard `shard`'s rows of the tables to `sink`. scan.readers:
  // threads reading a base of HASHED/DENSE rows at once (EXACT bases and
  // increments are read by one, in key order); scan.mapped: how the files
  // are read. The sink's error stops the read and is returned; kCorruption
  // names a damaged checkpoint.
  Status ReadShard(uint32_t shard, const ScanOptions& scan, ChainRowSink* sink);

  uint64_t bytes_read() const { return bytes_read_; }

  struct Table;  // what a shard's read gathers for one table (internal)

 private:
  explicit ChainReader(std::vector<CheckpointInfo> chain);
  Status Scan(size_t link, uint32_t shard, ScanOptions scan,
              const SinkFactory& make_sink);

  const std::vector<CheckpointInfo> chain_;
  std::vector<std::unique_ptr<Table>> tables_;
  uint64_t bytes_read_ = 0;
};

}  // namespace ps::checkpoint
