// PartitionedSums: sums a large push's gradients per row without touching
// memory in proportion to the table. The keys' (row, gradient) pairs are
// first partitioned by row range into buckets, each bucket a span of rows
// whose sums fit in the L2 cache; then every bucket is summed into a small
// dense slice and drained in row order. Random writes land in cache instead
// of in a table-sized buffer in DRAM, and the memory used is proportional to
// the push (8 bytes per key) plus one slice per thread.
//
// The partition is one pass over the keys: each key is hashed, and its pair
// appended to its bucket's chain of fixed-size chunks in the thread's own
// arena, through a cache-line write-combining buffer per bucket (no
// histogram pass first, so the keys are read once and no per-key bucket
// index is written out and read back).
//
// The partition is stable and the buckets are summed in key order (a
// bucket's chunks of thread 0, then of thread 1, ...), so a row's
// duplicates are added in the order of the keys: the same bits as
// DenseAccumulator and PushPipeline's sort path.
//
// Both passes run on the SharedPool's threads when it is free (each thread
// partitions a contiguous part of the keys, then sums a contiguous run of
// buckets); else on the calling thread.
//
// Not thread-safe: one Sum at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "client/huge_array.h"
#include "client/shard_router.h"
#include "client/shared_pool.h"

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
  static constexpr uint32_t kNoChunk = UINT32_MAX;
  // One thread's scratch. Partition: its write-combining lines (one per
  // bucket) and its arena of chunks, chained per bucket (head, tail, next)
  // with the bucket's pair count. Sum: the run it fills and its slice of
  // sums.
  struct PartOutput {
    HugeArray<Pair> lines;
    HugeArray<Pair> chunks;       // 64-byte aligned: lines are streamed
    std::vector<uint32_t> next;   // per chunk: the bucket's next one
    std::vector<uint32_t> head;   // per bucket: its first chunk
    std::vector<uint32_t> tail;   // per bucket: the chunk being filled
    std::vector<uint64_t> count;  // per bucket: its pairs
    std::vector<uint32_t> rows;
    std::vector<float> values;
    std::vector<float> slice;      // (1 << shift_) x dim, zero between uses
    std::vector<uint64_t> bitmap;  // rows of the slice touched
  };

  struct Locator;

  void Layout(const ShardRouter& router, uint32_t dim);
  // Hashes part `part`'s keys and appends their pairs to its chains.
  void Partition(const RowHash& hash, const Locator& where,
                 std::span<const uint64_t> keys, std::span<const float> grads,
                 size_t part);
  Status SumBuckets(std::span<const float> grads, size_t part, const RunFn& fn);

  uint32_t dim_ = 0;
  uint32_t shift_ = 0;                  // a bucket spans 1 << shift_ rows
  uint64_t chunk_pairs_ = 0;            // pairs per chunk (a power of two)
  std::vector<uint32_t> bucket_base_;   // first bucket of each shard
  std::vector<uint32_t> bucket_shard_;  // shard of each bucket
  size_t parts_ = 1;
  std::vector<size_t> key_begin_;            // parts_ + 1 key borders
  std::vector<uint32_t> part_first_bucket_;  // parts_ + 1 bucket borders
  std::vector<PartOutput> out_;
};

}  // namespace ps::worker
