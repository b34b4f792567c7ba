#include "client/push_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "client/push_shape.h"
#include "client/sorted_sums.h"
#include "protocol/inbox_slot.h"
#include "protocol/table_config.h"

namespace ps::worker {

protocol::SparsePacketMeta PushPipeline::MetaFor(
    uint32_t shard, kernels::ValueType type) const {
  protocol::SparsePacketMeta meta;
  meta.table_id = spec_.id();
  meta.shard_id = shard;
  meta.sender_id = clock_.worker_id();
  meta.step = clock_.current();
  meta.row_dim = spec_.dim();
  meta.value_type = type;
  meta.index_encoding = protocol::IndexEncoding::kDeltaVarint;
  return meta;
}

kernels::ValueType PushPipeline::PushType() const {
  return config_.push_value_type;
}

bool PushPipeline::Sparsifies() const {
  return config_.sparsify != proto::SPARSIFY_NONE;
}

// Encodes sorted `rows`/`values` of one shard into `buffers` and writes the
// packets.
Status PushPipeline::SendRows(uint32_t shard, kernels::ValueType type,
                              std::span<const uint32_t> rows,
                              std::span<const float> values,
                              EncodeBuffers& buffers) {
  if (rows.empty()) return Status::OK();
  if (quant_ != nullptr && type != kernels::ValueType::kFp32 &&
      quant_sends_.fetch_add(1, std::memory_order_relaxed) %
              kQuantSampleEvery ==
          0) {
    std::vector<float> seen(values.size());
    kernels::RoundTrip(type, values.data(), values.size(),
                       kernels::kDefaultInt8Block, seen.data());
    quant_->Record(spec_.id(), type, values, seen);
  }
  InboxWriter& inbox = servers_[shard].inbox();
  // Headroom for the slot header's prefix, so that InboxWriter puts the
  // first packet from this buffer too, without a staging copy.
  PS_RETURN_IF_ERROR(protocol::EncodeSparsePackets(
      MetaFor(shard, type), rows, values, inbox.max_packet_bytes(),
      &buffers.bytes, &buffers.packets,
      protocol::InboxSlotHeader::kPrefixBytes));
  return inbox.WritePackets(buffers.bytes, buffers.packets);
}

void PushPipeline::EnsureState(bool dense) {
  const uint32_t shards = router_.shards();
  if (shards_.size() != shards) shards_ = std::vector<ShardState>(shards);
  if (dense) {
    for (uint32_t s = 0; s < shards; ++s) {
      shards_[s].sums.Reset(router_.RowsOf(s), spec_.dim());
    }
  }
}

// Keys are handled in blocks: the rows of block b are computed and
// prefetched while block b - 1 is added, so several cache (and TLB) misses
// are in flight instead of one.
constexpr size_t kBlock = 16;

// Adds the keys whose global row lies in [lo, hi) (a thread's part).
void PushPipeline::AccumulateRange(std::span<const uint64_t> keys,
                                   std::span<const float> grads, uint64_t lo,
                                   uint64_t hi) {
  const ShardRouter& loc = router_;
  const uint32_t dim = spec_.dim();
  const size_t n = keys.size();
  const uint64_t* k = keys.data();
  const float* g = grads.data();
  struct Item {
    uint32_t shard, row;
    uint32_t key;
  };
  Item items[2][kBlock];
  size_t prev_n = 0;
  const bool one_shard = loc.shards() == 1;
  for (size_t b = 0;; b += kBlock) {
    const size_t m = b < n ? std::min(kBlock, n - b) : 0;
    Item* cur = items[(b / kBlock) & 1];
    size_t c = 0;
    for (size_t j = 0; j < m; ++j) {
      const uint64_t row = loc.GlobalRow(k[b + j]);
      const uint32_t s = one_shard ? 0 : loc.ShardOfRow(row);
      cur[c] = {s, static_cast<uint32_t>(row - loc.FirstRow(s)),
                static_cast<uint32_t>(b + j)};
      shards_[s].sums.Prefetch(cur[c].row);
      c += (row >= lo) & (row < hi);  // keep only this part's rows
    }
    const Item* prev = items[((b / kBlock) & 1) ^ 1];
    if (dim == 1) {
      for (size_t j = 0; j < prev_n; ++j) {
        shards_[prev[j].shard].sums.Add1(prev[j].row, g[prev[j].key]);
      }
    } else {
      for (size_t j = 0; j < prev_n; ++j) {
        shards_[prev[j].shard].sums.Add(prev[j].row,
                                        g + size_t{prev[j].key} * dim);
      }
    }
    if (m == 0) break;
    prev_n = c;
  }
}

// Splits the global rows into one part per pool thread (borders aligned to
// 64 local rows, so no two threads share a bitmap word) when the push is
// large and the pool is free; each thread hashes every key but adds only
// its part's, so no row is written by two threads.
void PushPipeline::AccumulateDense(std::span<const uint64_t> keys,
                                   std::span<const float> grads) {
  const ShardRouter& loc = router_;
  const uint64_t cap = loc.capacity();
  const int parts = pool_.size();
  if (keys.size() >= (1u << 20) && parts > 1 && cap >= 64u * parts) {
    std::vector<uint64_t> border(parts + 1);
    for (int p = 0; p <= parts; ++p) {
      const uint64_t row = cap * p / parts;
      if (row >= cap) {
        border[p] = cap;
        continue;
      }
      const uint64_t first = loc.FirstRow(loc.ShardOfRow(row));
      border[p] = first + (row - first) / 64 * 64;
    }
    if (pool_.TryParallelFor(parts, 1, [&](size_t b, size_t e, int) {
          for (size_t p = b; p < e; ++p) {
            AccumulateRange(keys, grads, border[p], border[p + 1]);
          }
        })) {
      return;
    }
  }
  AccumulateRange(keys, grads, 0, cap);
}

Status PushPipeline::EnsureFeedback(ShardState& st) {
  if (st.feedback != nullptr) return Status::OK();
  kernels::ErrorFeedbackOptions o;
  o.rows = st.sums.rows();
  o.row_dim = spec_.dim();
  o.value_type = PushType();
  o.stats = quant_;
  o.table_id = spec_.id();
  if (config_.sparsify == proto::SPARSIFY_TOPK) {
    o.selection = kernels::ErrorFeedbackOptions::Selection::kTopK;
  } else {
    o.selection = kernels::ErrorFeedbackOptions::Selection::kThreshold;
    o.epsilon = config_.sparsify_epsilon;
  }
  auto feedback = std::make_unique<kernels::ErrorFeedback>(o);
  PS_RETURN_IF_ERROR(feedback->Validate());
  st.feedback = std::move(feedback);
  return Status::OK();
}

// Error feedback over one shard's sums: residual += sums, select, send what
// is selected (quantized as the receiver decodes it), keep the rest. Top-k's
// k follows how many rows this push touched.
Status PushPipeline::SendSparsified(uint32_t s) {
  ShardState& st = shards_[s];
  Status status = EnsureFeedback(st);
  if (status.ok()) {
    if (config_.sparsify == proto::SPARSIFY_TOPK) {
      st.feedback->set_k(static_cast<size_t>(
          std::ceil(static_cast<double>(config_.topk_fraction) *
                    st.sums.CountTouched())));
    }
    status = st.feedback->Step(st.sums.dense(), nullptr, &st.selection);
  }
  st.sums.ClearTouched();  // the sums are zero again for the next push
  PS_RETURN_IF_ERROR(status);
  return SendRows(s, st.selection.value_type, st.selection.rows,
                  st.selection.values, st.buffers);
}

// Sums a large push by partitioning; each pool thread encodes and writes
// the runs it summed as they come (InboxWriter serializes the writes), so
// the server applies the first while the rest are summed.
Status PushPipeline::PushPartitioned(std::span<const uint64_t> keys,
                                     std::span<const float> grads) {
  const kernels::ValueType type = PushType();
  const size_t parts = static_cast<size_t>(pool_.size());
  if (part_buffers_.size() < parts) part_buffers_.resize(parts);
  return partitioned_.Sum(
      router_, spec_.dim(), keys, grads, pool_,
      [&](size_t part, uint32_t s, std::span<const uint32_t> rows,
          std::span<const float> values) {
        return SendRows(s, type, rows, values, part_buffers_[part]);
      });
}

Status PushPipeline::PushSorted(std::span<const uint64_t> keys,
                                std::span<const float> grads) {
  const uint32_t shards = router_.shards();
  const uint32_t dim = spec_.dim();
  router_.SplitByShard(keys, &pairs_);
  Status status;
  for (uint32_t s = 0; s < shards && status.ok(); ++s) {
    auto& pairs = pairs_[s];
    if (pairs.empty()) continue;
    SortByRow(&pairs, router_.RowsOf(s), &sort_scratch_);
    ShardState& st = shards_[s];
    st.rows.clear();
    st.values.clear();
    for (uint64_t p : pairs) {
      AddToSortedSums(PackedRow(p), grads.data() + size_t{PackedIndex(p)} * dim,
                      dim, &st.rows, &st.values);
    }
    status = SendRows(s, PushType(), st.rows, st.values, st.buffers);
  }
  return status;
}

Status PushPipeline::Post(std::span<const uint64_t> keys,
                          std::span<const float> grads) {
  PS_RETURN_IF_ERROR(CheckPushShape(spec_, keys.size(), grads.size()));
  if (keys.size() > UINT32_MAX) {
    return InvalidArgument("push of more than 2^32 keys");
  }
  PS_RETURN_IF_ERROR(router_.CheckDenseKeys(keys, spec_.name()));
  std::lock_guard<std::mutex> lock(mu_);
  const bool sparsify = Sparsifies();
  EnsureState(sparsify);
  if (!sparsify) {
    return keys.size() * 8 >= router_.capacity() ? PushPartitioned(keys, grads)
                                                 : PushSorted(keys, grads);
  }
  AccumulateDense(keys, grads);
  Status status;
  for (uint32_t s = 0; s < router_.shards(); ++s) {
    Status st = SendSparsified(s);
    if (status.ok() && !st.ok()) status = st;
  }
  return status;
}

Status PushPipeline::PostWholeTable(std::span<const float> grads) {
  const uint64_t cap = router_.capacity();
  const uint32_t dim = spec_.dim();
  if (grads.size() != cap * dim) {
    return InvalidArgument("dense push to table " + spec_.name() + " needs " +
                           std::to_string(cap * dim) + " values, got " +
                           std::to_string(grads.size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  EnsureState(false);
  const kernels::ValueType type = PushType();
  for (uint32_t s = 0; s < router_.shards(); ++s) {
    ShardState& st = shards_[s];
    const uint64_t first = router_.FirstRow(s);
    const uint64_t rows = router_.RowsOf(s);
    st.rows.resize(rows);
    for (uint64_t r = 0; r < rows; ++r) st.rows[r] = static_cast<uint32_t>(r);
    PS_RETURN_IF_ERROR(SendRows(
        s, type, st.rows, grads.subspan(first * dim, rows * dim), st.buffers));
  }
  return Status::OK();
}

Status PushPipeline::PostResiduals() {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t s = 0; s < shards_.size(); ++s) {
    ShardState& st = shards_[s];
    if (st.feedback == nullptr) continue;
    PS_RETURN_IF_ERROR(st.feedback->Flush(nullptr, &st.selection));
    PS_RETURN_IF_ERROR(SendRows(s, kernels::ValueType::kFp32, st.selection.rows,
                                st.selection.values, st.buffers));
  }
  return Status::OK();
}

}  // namespace ps::worker
