// PullPlanner: the pull path of one HASHED or DENSE table: rows are read
// one-sidedly out of the servers' memory, no server thread involved.
//
// Cost rule, per call: when the keys are many next to the table
// (keys * 8 >= rows), every shard is read whole with one Get each (posted
// to all shards at once) and each key copies its row from the local copy:
// the read costs at most 8x the bytes returned and needs no sorting.
// Otherwise, per shard, the (row, key) pairs are radix-sorted, duplicates
// read once, adjacent rows (and small holes) coalesced into segments, or
// the whole span read with one segment when the rows fill more than 1/8 of
// it; one ReadV per shard is posted to all shards before waiting for any.
//
// Start* plan the reads and post them; the returned handle's Wait waits for
// them and copies the rows into `out`. keys and out must stay valid until
// then.
//
// Thread-safe: pulls of the table may run concurrently; each takes its own
// set of buffers from a pool (so they neither share nor reallocate them).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "client/huge_array.h"
#include "client/pending_op.h"
#include "client/row_plan.h"
#include "client/server_group.h"
#include "client/shard_router.h"
#include "client/shared_pool.h"
#include "core/endpoint.h"
#include "protocol/ps.pb.h"

namespace ps::worker {

class PullPlanner {
 public:
  // Everything passed must outlive the planner and its pending pulls.
  PullPlanner(const proto::TableSpec& spec, const ShardRouter& router,
              ServerGroup& servers, SharedPool& pool)
      : spec_(spec), router_(router), servers_(servers), pool_(pool) {}

  // Reads the keys' rows into out (keys.size() x dim floats).
  PendingOp Start(std::span<const uint64_t> keys, std::span<float> out);
  // DENSE tables: the whole table (capacity x dim floats).
  PendingOp StartWholeTable(std::span<float> out);

 private:
  // The buffers of one pull.
  struct Scratch {
    HugeArray<float> table;  // whole-table reads: capacity x dim
    std::vector<std::vector<uint64_t>> pairs;  // per shard
    std::vector<uint64_t> sort_scratch;
    std::vector<std::vector<uint32_t>> unique;         // per shard
    std::vector<ReadPlan> plans;                       // per shard
    std::vector<std::vector<float>> buffers;           // per shard
    std::vector<std::vector<xfer::Segment>> segments;  // per shard
    std::vector<xfer::Request> requests;
    std::vector<uint32_t> request_shard;
  };
  class Pending;

  std::unique_ptr<Scratch> TakeScratch();
  void ReturnScratch(std::unique_ptr<Scratch> s);
  // Posts one Get per shard of rows [0, RowsOf(s)) into `dst` (capacity x
  // dim, in global row order).
  void PostWholeShards(float* dst, Scratch& sc);
  void PostSparse(std::span<const uint64_t> keys, Scratch& sc);
  // Waits for sc.requests; the first error, named by shard.
  Status WaitRequests(Scratch& sc);
  // Copies each key's row out of the whole-table copy / the shard buffers.
  void CopyFromWhole(std::span<const uint64_t> keys, std::span<float> out,
                     const Scratch& sc);
  void CopyFromSparse(std::span<float> out, const Scratch& sc) const;
  // Runs fn(begin, end) over [0, n), on the shared pool when it is free and
  // n is large enough to pay for the hand-off.
  void ForRange(size_t n, const std::function<void(size_t, size_t)>& fn);

  const proto::TableSpec& spec_;
  const ShardRouter& router_;
  ServerGroup& servers_;
  SharedPool& pool_;

  std::mutex mu_;  // guards scratch_pool_
  std::vector<std::unique_ptr<Scratch>> scratch_pool_;
};

}  // namespace ps::worker
