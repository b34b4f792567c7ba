#include "worker/push_path.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/error_feedback.h"
#include "protocol/table_config.h"

namespace ps::worker {
namespace {

protocol::SparsePacketMeta MetaFor(const ClientContext& ctx,
                                   const TableState& table, uint32_t shard,
                                   kernels::ValueType type) {
  protocol::SparsePacketMeta meta;
  meta.table_id = table.spec.id();
  meta.shard_id = shard;
  meta.sender_id = ctx.worker_id;
  meta.step = ctx.clock.load(std::memory_order_relaxed);
  meta.row_dim = table.spec.dim();
  meta.value_type = type;
  meta.index_encoding = protocol::IndexEncoding::kDeltaVarint;
  return meta;
}

kernels::ValueType PushType(const TableState& table) {
  return protocol::ValueTypeFromProto(table.spec.push_value_type());
}

bool Sparsifies(const TableState& table) {
  const std::string& m = table.spec.sparsify().method();
  return !m.empty() && m != "none";
}

// Encodes sorted `rows`/`values` of one shard and writes the packets.
Status SendRows(ClientContext& ctx, TableState& table, uint32_t shard,
                kernels::ValueType type, std::span<const uint32_t> rows,
                std::span<const float> values, ShardPushState& st) {
  if (rows.empty()) return Status::OK();
  ServerLink& link = *ctx.servers[shard];
  PS_RETURN_IF_ERROR(protocol::EncodeSparsePackets(
      MetaFor(ctx, table, shard, type), rows, values,
      link.inbox->max_packet_bytes(), &st.encoded, &st.packets));
  return link.inbox->WritePackets(st.encoded, st.packets);
}

// Rows per encode chunk: about four slots' worth, so the first packets
// reach the server early and the buffers stay in cache.
size_t ChunkRows(const ServerLink& link, const TableState& table,
                 kernels::ValueType type) {
  const size_t row_bytes = table.spec.dim() * kernels::ValueTypeBytes(type) + 2;
  return std::max<size_t>(1, 4 * link.inbox->max_packet_bytes() / row_bytes);
}

void EnsurePushState(TableState& table, bool dense) {
  const uint32_t shards = table.locator.shards();
  if (table.push.size() != shards)
    table.push = std::vector<ShardPushState>(shards);
  if (dense) {
    for (uint32_t s = 0; s < shards; ++s) {
      table.push[s].sums.Reset(table.locator.RowsOf(s), table.spec.dim());
    }
  }
}

Status CheckDenseKeys(const TableState& table, std::span<const uint64_t> keys) {
  if (!table.locator.dense()) return Status::OK();
  const uint64_t cap = table.locator.capacity();
  for (uint64_t k : keys) {
    if (k >= cap) {
      return InvalidArgument("key " + std::to_string(k) + " of DENSE table " +
                             table.spec.name() + " is past its " +
                             std::to_string(cap) + " rows");
    }
  }
  return Status::OK();
}

// Keys are handled in blocks: the rows of block b are computed and
// prefetched while block b - 1 is added, so several cache (and TLB) misses
// are in flight instead of one.
constexpr size_t kBlock = 16;

// Adds the keys whose global row lies in [lo, hi) (a thread's part).
void AccumulateRange(TableState& table, std::span<const uint64_t> keys,
                     std::span<const float> grads, uint64_t lo, uint64_t hi) {
  const KeyLocator& loc = table.locator;
  const uint32_t dim = table.spec.dim();
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
      table.push[s].sums.Prefetch(cur[c].row);
      c += (row >= lo) & (row < hi);  // keep only this part's rows
    }
    const Item* prev = items[((b / kBlock) & 1) ^ 1];
    if (dim == 1) {
      for (size_t j = 0; j < prev_n; ++j) {
        table.push[prev[j].shard].sums.Add1(prev[j].row, g[prev[j].key]);
      }
    } else {
      for (size_t j = 0; j < prev_n; ++j) {
        table.push[prev[j].shard].sums.Add(prev[j].row,
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
void AccumulateDense(ClientContext& ctx, TableState& table,
                     std::span<const uint64_t> keys,
                     std::span<const float> grads) {
  const KeyLocator& loc = table.locator;
  const uint64_t cap = loc.capacity();
  std::unique_lock<std::mutex> lock(ctx.pool_mu, std::defer_lock);
  if (keys.size() >= (1u << 20) && ctx.pool != nullptr &&
      ctx.pool->size() > 1 && cap >= 64u * ctx.pool->size() &&
      lock.try_lock()) {
    const int parts = ctx.pool->size();
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
    ctx.pool->ParallelFor(parts, 1, [&](size_t b, size_t e, int) {
      for (size_t p = b; p < e; ++p) {
        AccumulateRange(table, keys, grads, border[p], border[p + 1]);
      }
    });
    return;
  }
  AccumulateRange(table, keys, grads, 0, cap);
}

// Error feedback over one shard's sums: acc = sums + residual, select,
// send what is selected (quantized as the receiver decodes it), keep the
// rest. The residual lives here (not in a long-lived ErrorFeedback) because
// top-k's k depends on how many rows this push touched.
Status SendSparsified(ClientContext& ctx, TableState& table, uint32_t s) {
  ShardPushState& st = table.push[s];
  const uint32_t dim = table.spec.dim();
  const uint64_t rows = st.sums.rows();
  std::vector<float> acc(st.sums.dense().begin(), st.sums.dense().end());
  size_t touched = 0;
  {
    std::vector<uint32_t> r;
    std::vector<float> v;
    size_t cursor = 0;
    while (st.sums.Drain(&cursor, SIZE_MAX, &r, &v)) {
    }
    touched = r.size();
  }
  if (st.residual.size() != rows * dim) st.residual.assign(rows * dim, 0.0f);
  for (size_t i = 0; i < acc.size(); ++i) acc[i] += st.residual[i];

  kernels::ErrorFeedbackOptions o;
  o.rows = rows;
  o.row_dim = dim;
  o.value_type = PushType(table);
  const protocol::TableRuntimeConfig& c = table.config;
  if (c.sparsify == proto::SPARSIFY_TOPK) {
    o.selection = kernels::ErrorFeedbackOptions::Selection::kTopK;
    o.k = static_cast<size_t>(
        std::ceil(static_cast<double>(c.topk_fraction) * touched));
  } else {
    o.selection = kernels::ErrorFeedbackOptions::Selection::kThreshold;
    o.epsilon = c.sparsify_epsilon;
  }
  kernels::ErrorFeedback ef(o);
  PS_RETURN_IF_ERROR(ef.Validate());
  kernels::SparseSelection sel;
  PS_RETURN_IF_ERROR(ef.Step(acc, nullptr, &sel));
  std::copy(ef.residual().begin(), ef.residual().end(), st.residual.begin());
  return SendRows(ctx, table, s, sel.value_type, sel.rows, sel.values, st);
}

Status DrainAndSend(ClientContext& ctx, TableState& table, uint32_t s) {
  ShardPushState& st = table.push[s];
  const kernels::ValueType type = PushType(table);
  const size_t chunk = ChunkRows(*ctx.servers[s], table, type);
  size_t cursor = 0;
  bool more = true;
  Status status;
  while (more) {
    st.rows.clear();
    st.values.clear();
    more = st.sums.Drain(&cursor, chunk, &st.rows, &st.values);
    // Keep draining after an error so the sums are zero for the next push.
    if (status.ok())
      status = SendRows(ctx, table, s, type, st.rows, st.values, st);
  }
  return status;
}

Status PushSorted(ClientContext& ctx, TableState& table,
                  std::span<const uint64_t> keys,
                  std::span<const float> grads) {
  const KeyLocator& loc = table.locator;
  const uint32_t shards = loc.shards();
  const uint32_t dim = table.spec.dim();
  table.push_pairs.resize(shards);
  for (auto& p : table.push_pairs) p.clear();
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t row = loc.GlobalRow(keys[i]);
    const uint32_t s = loc.ShardOfRow(row);
    table.push_pairs[s].push_back(
        PackRowIndex(static_cast<uint32_t>(row - loc.FirstRow(s)),
                     static_cast<uint32_t>(i)));
  }
  Status status;
  for (uint32_t s = 0; s < shards && status.ok(); ++s) {
    auto& pairs = table.push_pairs[s];
    if (pairs.empty()) continue;
    SortByRow(&pairs, loc.RowsOf(s), &table.push_sort_scratch);
    ShardPushState& st = table.push[s];
    st.rows.clear();
    st.values.clear();
    for (uint64_t p : pairs) {
      const uint32_t row = PackedRow(p);
      const float* g = grads.data() + size_t{PackedIndex(p)} * dim;
      if (st.rows.empty() || st.rows.back() != row) {
        st.rows.push_back(row);
        st.values.insert(st.values.end(), g, g + dim);
      } else {
        float* v = st.values.data() + st.values.size() - dim;
        for (uint32_t j = 0; j < dim; ++j) v[j] += g[j];
      }
    }
    status = SendRows(ctx, table, s, PushType(table), st.rows, st.values, st);
  }
  return status;
}

Status FlushAll(ClientContext& ctx) {
  Status first;
  for (auto& link : ctx.servers) {
    Status s = link->inbox->Flush();
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace

Status PushRows(ClientContext& ctx, TableState& table,
                std::span<const uint64_t> keys, std::span<const float> grads) {
  const uint32_t dim = table.spec.dim();
  if (grads.size() != keys.size() * dim) {
    return InvalidArgument("push to table " + table.spec.name() + ": " +
                           std::to_string(grads.size()) + " values for " +
                           std::to_string(keys.size()) + " keys of dim " +
                           std::to_string(dim));
  }
  if (keys.size() > UINT32_MAX) {
    return InvalidArgument("push of more than 2^32 keys");
  }
  PS_RETURN_IF_ERROR(CheckDenseKeys(table, keys));
  std::lock_guard<std::mutex> lock(table.push_mu);
  const bool sparsify = Sparsifies(table);
  const bool dense = sparsify || keys.size() * 8 >= table.locator.capacity();
  EnsurePushState(table, dense);
  Status status;
  if (dense) {
    AccumulateDense(ctx, table, keys, grads);
    for (uint32_t s = 0; s < table.locator.shards(); ++s) {
      Status st = sparsify ? SendSparsified(ctx, table, s)
                           : DrainAndSend(ctx, table, s);
      if (status.ok() && !st.ok()) status = st;
    }
  } else {
    status = PushSorted(ctx, table, keys, grads);
  }
  PS_RETURN_IF_ERROR(status);
  return FlushAll(ctx);
}

Status PushWholeTable(ClientContext& ctx, TableState& table,
                      std::span<const float> grads) {
  const uint64_t cap = table.locator.capacity();
  const uint32_t dim = table.spec.dim();
  if (grads.size() != cap * dim) {
    return InvalidArgument("dense push to table " + table.spec.name() +
                           " needs " + std::to_string(cap * dim) +
                           " values, got " + std::to_string(grads.size()));
  }
  std::lock_guard<std::mutex> lock(table.push_mu);
  EnsurePushState(table, false);
  const kernels::ValueType type = PushType(table);
  for (uint32_t s = 0; s < table.locator.shards(); ++s) {
    ShardPushState& st = table.push[s];
    const uint64_t first = table.locator.FirstRow(s);
    const uint64_t rows = table.locator.RowsOf(s);
    st.rows.resize(rows);
    for (uint64_t r = 0; r < rows; ++r) st.rows[r] = static_cast<uint32_t>(r);
    PS_RETURN_IF_ERROR(SendRows(ctx, table, s, type, st.rows,
                                grads.subspan(first * dim, rows * dim), st));
  }
  return FlushAll(ctx);
}

Status FlushTableResiduals(ClientContext& ctx, TableState& table) {
  std::lock_guard<std::mutex> lock(table.push_mu);
  const uint32_t dim = table.spec.dim();
  for (uint32_t s = 0; s < table.push.size(); ++s) {
    ShardPushState& st = table.push[s];
    if (st.residual.empty()) continue;
    st.rows.clear();
    st.values.clear();
    const size_t rows = st.residual.size() / dim;
    for (size_t r = 0; r < rows; ++r) {
      const float* v = st.residual.data() + r * dim;
      if (std::any_of(v, v + dim, [](float x) { return x != 0.0f; })) {
        st.rows.push_back(static_cast<uint32_t>(r));
        st.values.insert(st.values.end(), v, v + dim);
      }
    }
    std::fill(st.residual.begin(), st.residual.end(), 0.0f);
    PS_RETURN_IF_ERROR(SendRows(ctx, table, s, kernels::ValueType::kFp32,
                                st.rows, st.values, st));
  }
  return FlushAll(ctx);
}

}  // namespace ps::worker
