// PushPipeline: the push path of one HASHED or DENSE table: keys -> (shard,
// local row), duplicates summed per row, rows sorted per shard, optional
// sparsification with error feedback, encoding into slot-sized sparse
// packets and writing them into the worker's inbox on each server.
//
// Three ways to sum duplicates:
//  - partitioned: when the keys are many next to the table (keys * 8 >=
//    rows), PartitionedSums buckets the pairs by row range and sums each
//    bucket in cache, on the pool's threads; each thread encodes and writes
//    the rows it summed as they come, so the server applies while we sum.
//  - sorted: otherwise, (row, key index) pairs per shard are radix-sorted
//    and summed in key order.
//  - dense: a sparsifying table keeps a whole-shard DenseAccumulator (its
//    error feedback needs the shard's dense gradient): one random add per
//    key.
// All sum a row's duplicates in key order, so they give the same bits.
//
// A sparsifying table keeps one kernels::ErrorFeedback per shard for the
// life of the pipeline: its residual is what earlier pushes held back, and
// each push adds its sums to it in place.
//
// Every Post* call returns once its packets are posted to the inboxes (the
// transfers may still be in flight: ServerGroup::FlushInboxes waits for
// them); it may wait for inbox credit while a server is behind.
//
// Thread-safe: one push of the table at a time (a mutex: the sums are per
// table shard); pushes of different tables run in parallel.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "base/status.h"
#include "client/dense_accumulator.h"
#include "client/partitioned_sums.h"
#include "client/server_group.h"
#include "client/shard_router.h"
#include "client/shared_pool.h"
#include "client/worker_clock.h"
#include "kernels/error_feedback.h"
#include "protocol/ps.pb.h"
#include "protocol/sparse_packet.h"
#include "protocol/table_runtime_config.h"

namespace ps::worker {

class PushPipeline {
 public:
  // Everything passed must outlive the pipeline. `quant` (null: none)
  // gets the quantization error of a sample of the quantized pushes (one
  // in kQuantSampleEvery sends, round-tripped once more) and of every
  // sparsified one (the error feedback records it).
  PushPipeline(const proto::TableSpec& spec,
               const protocol::TableRuntimeConfig& config,
               const ShardRouter& router, ServerGroup& servers,
               const WorkerClock& clock, SharedPool& pool,
               kernels::QuantStats* quant = nullptr)
      : spec_(spec),
        config_(config),
        router_(router),
        servers_(servers),
        clock_(clock),
        pool_(pool),
        quant_(quant) {}

  static constexpr uint64_t kQuantSampleEvery = 8;

  // Adds grads (keys.size() x dim) to the keys' rows.
  Status Post(std::span<const uint64_t> keys, std::span<const float> grads);
  // DENSE tables: grads holds the whole table (capacity x dim).
  Status PostWholeTable(std::span<const float> grads);
  // Sends the residual of a sparsifying table in fp32 and zeroes it.
  Status PostResiduals();

 private:
  // Where packets are encoded before they are written; reused from push to
  // push.
  struct EncodeBuffers {
    std::vector<uint8_t> bytes;
    std::vector<protocol::EncodedPacket> packets;
  };
  // Per shard: the dense sums, the error feedback of a sparsifying table
  // (created at its first push) and the encode buffers.
  struct ShardState {
    DenseAccumulator sums;
    std::unique_ptr<kernels::ErrorFeedback> feedback;
    kernels::SparseSelection selection;
    std::vector<uint32_t> rows;
    std::vector<float> values;
    EncodeBuffers buffers;
  };

  protocol::SparsePacketMeta MetaFor(uint32_t shard,
                                     kernels::ValueType type) const;
  kernels::ValueType PushType() const;
  bool Sparsifies() const;
  void EnsureState(bool dense);
  Status SendRows(uint32_t shard, kernels::ValueType type,
                  std::span<const uint32_t> rows, std::span<const float> values,
                  EncodeBuffers& buffers);
  void AccumulateRange(std::span<const uint64_t> keys,
                       std::span<const float> grads, uint64_t lo, uint64_t hi);
  void AccumulateDense(std::span<const uint64_t> keys,
                       std::span<const float> grads);
  Status EnsureFeedback(ShardState& st);
  Status SendSparsified(uint32_t shard);
  Status PushPartitioned(std::span<const uint64_t> keys,
                         std::span<const float> grads);
  Status PushSorted(std::span<const uint64_t> keys,
                    std::span<const float> grads);

  const proto::TableSpec& spec_;
  const protocol::TableRuntimeConfig config_;  // spec_, parsed once
  const ShardRouter& router_;
  ServerGroup& servers_;
  const WorkerClock& clock_;
  SharedPool& pool_;
  kernels::QuantStats* const quant_;
  std::atomic<uint64_t> quant_sends_{0};

  std::mutex mu_;  // one push of this table at a time; guards what follows
  std::vector<ShardState> shards_;  // sized at the first push
  // Large pushes of unsparsified tables, and each pool thread's encode
  // buffers for them.
  PartitionedSums partitioned_;
  std::vector<EncodeBuffers> part_buffers_;
  // Sort-path scratch for small pushes.
  std::vector<std::vector<uint64_t>> pairs_;  // per shard
  std::vector<uint64_t> sort_scratch_;
};

}  // namespace ps::worker
