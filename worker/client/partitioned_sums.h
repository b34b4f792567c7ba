// PartitionedSums: sums a large push's gradients per row without touching
// memory in proportion to the table. The keys' (row, gradient) pairs are
// first partitioned by row range into buckets (one stable counting-sort
// pass: a histogram that hashes each key once, then a scatter), each bucket a
// span of rows whose sums fit in the L2 cache; then every bucket is summed into
// a small dense slice and drained in row order. Random writes land in cache
// instead of in a table-sized buffer in DRAM, and the memory used is
// proportional to the push (16 bytes per key) plus one slice per thread.
//
// The partition is stable and the buckets are summed in key order, so a
// row's duplicates are added in the order of the keys: the same bits as
// DenseAccumulator and PushPipeline's sort path.
//
// Both passes run on the SharedPool's threads when it is free (each thread
// hashes and scatters a contiguous part of the keys, then sums a contiguous
// run of buckets); else on the calling thread.
//
// Not thread-safe: one Sum at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "worker/client/huge_array.h"
#include "worker/client/shard_router.h"
#include "worker/client/shared_pool.h"

namespace ps::worker {

class PartitionedSums {
 public:
  // Sums grads (keys.size() x dim, row-major) per row of `router`'s table
  // and hands the sums over as they are done: fn(part, shard, rows, values)
  // with rows shard-local and strictly increasing and values rows.size() x
  // dim floats (valid during the call). Parts are the pool threads' shares,
  // numbered in row order: within a part the runs come in row order, shard
  // by shard, and a shard's rows in part p all lie below its rows in part
  // p + 1. fn is called from the pool's threads, for different parts at
  // the same time. A part stops at fn's first error; returns the error of
  // the lowest part that had one.
  using RunFn = std::function<Status(
      size_t, uint32_t, std::span<const uint32_t>, std::span<const float>)>;
  Status Sum(const ShardRouter& router, uint32_t dim,
             std::span<const uint64_t> keys, std::span<const float> grads,
             SharedPool& pool, const RunFn& fn);
  // How many parts the last Sum was split into.
  size_t parts() const { return parts_; }

 private:
  // One (local row, payload) pair: the gradient's bits when dim is 1, else
  // the key's index into grads.
  struct Pair {
    uint32_t row;
    uint32_t payload;
  };
  // Pairs per 64-byte cache line.
  static constexpr uint64_t kPairsPerLine = 8;
  // One thread's scratch: its write-combining lines (one per bucket) and
  // where its share of each bucket starts, the run it fills and its slice
  // of sums.
  struct PartOutput {
    HugeArray<Pair> lines;
    std::vector<uint64_t> first;
    std::vector<uint32_t> rows;
    std::vector<float> values;
    std::vector<float> slice;      // (1 << shift_) x dim, zero between uses
    std::vector<uint64_t> bitmap;  // rows of the slice touched
  };

  struct Locator;

  void Layout(const ShardRouter& router, uint32_t dim);
  void Histogram(const RowHash& hash, const Locator& where,
                 std::span<const uint64_t> keys, size_t part);
  void Scatter(std::span<const float> grads, size_t part);
  Status SumBuckets(std::span<const float> grads, size_t part, const RunFn& fn);

  uint32_t dim_ = 0;
  uint32_t shift_ = 0;                  // a bucket spans 1 << shift_ rows
  std::vector<uint32_t> bucket_base_;   // first bucket of each shard
  std::vector<uint32_t> bucket_shard_;  // shard of each bucket
  size_t parts_ = 1;
  std::vector<size_t> key_begin_;       // parts_ + 1 key borders
  std::vector<uint64_t> cursor_;        // parts_ x buckets: scatter cursors
  std::vector<uint64_t> bucket_begin_;  // buckets + 1: pair borders
  std::vector<uint32_t> part_first_bucket_;  // parts_ + 1 bucket borders
  std::vector<uint64_t> out_begin_;  // per bucket: its rows in its part's
  std::vector<uint64_t> out_end_;    //   output, [begin, end)
  HugeArray<uint64_t> located_;      // per key: bucket << 32 | local row
  HugeArray<Pair> pairs_;            // 64-byte aligned: lines are streamed
  std::vector<PartOutput> out_;
};

}  // namespace ps::worker
