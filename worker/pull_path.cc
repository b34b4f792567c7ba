#include "worker/pull_path.h"

#include <algorithm>
#include <cstring>

namespace ps::worker {
namespace {

// ReadV entries per request: the tcp transport takes at most 65536.
constexpr size_t kMaxSegmentsPerReadV = 16384;

// Reads rows [0, RowsOf(s)) of every shard into `dst` (capacity x dim, in
// global row order), all shards in flight at once.
Status ReadWholeShards(ClientContext& ctx, TableState& table, float* dst) {
  const KeyLocator& loc = table.locator;
  const size_t row_bytes = sizeof(float) * table.spec.dim();
  std::vector<xfer::Request> requests;
  requests.reserve(loc.shards());
  for (uint32_t s = 0; s < loc.shards(); ++s) {
    ServerLink& link = *ctx.servers[s];
    requests.push_back(link.endpoint->PostGet(
        dst + loc.FirstRow(s) * table.spec.dim(), loc.RowsOf(s) * row_bytes,
        link.rows_region.at(table.spec.id()), 0));
  }
  Status first;
  for (uint32_t s = 0; s < requests.size(); ++s) {
    Status st = requests[s].Wait();
    if (first.ok() && !st.ok()) {
      first = st.WithContext(ctx.servers[s]->name + ": rows of table " +
                             table.spec.name());
    }
  }
  return first;
}

// Runs fn(begin, end) over [0, n), on the client's pool when it is free and
// n is large enough to pay for the hand-off.
void ForRange(ClientContext& ctx, size_t n,
              const std::function<void(size_t, size_t)>& fn) {
  constexpr size_t kMinParallel = 1 << 16;
  if (n >= kMinParallel && ctx.pool != nullptr) {
    std::unique_lock<std::mutex> lock(ctx.pool_mu, std::try_to_lock);
    if (lock.owns_lock()) {
      ctx.pool->ParallelFor(n, kMinParallel,
                            [&](size_t b, size_t e, int) { fn(b, e); });
      return;
    }
  }
  fn(0, n);
}

Status PullWhole(ClientContext& ctx, TableState& table,
                 std::span<const uint64_t> keys, std::span<float> out,
                 PullScratch& sc) {
  const KeyLocator& loc = table.locator;
  const uint32_t dim = table.spec.dim();
  sc.table.Resize(loc.capacity() * dim);
  PS_RETURN_IF_ERROR(ReadWholeShards(ctx, table, sc.table.data()));
  const float* src = sc.table.data();
  float* dst = out.data();
  const uint64_t* k = keys.data();
  // Blocks of keys: the rows of block b are computed and prefetched while
  // block b - 1 is copied, so many misses are in flight at once.
  constexpr size_t kBlock = 16;
  ForRange(ctx, keys.size(), [&](size_t begin, size_t end) {
    uint64_t rows[2][kBlock];
    size_t prev_begin = begin, prev_n = 0;
    for (size_t b = begin;; b += kBlock) {
      const size_t m = b < end ? std::min(kBlock, end - b) : 0;
      uint64_t* cur = rows[((b - begin) / kBlock) & 1];
      for (size_t j = 0; j < m; ++j) {
        cur[j] = loc.GlobalRow(k[b + j]) * dim;
        __builtin_prefetch(src + cur[j]);
      }
      const uint64_t* prev = rows[(((b - begin) / kBlock) & 1) ^ 1];
      if (dim == 1) {
        for (size_t j = 0; j < prev_n; ++j) dst[prev_begin + j] = src[prev[j]];
      } else {
        for (size_t j = 0; j < prev_n; ++j) {
          std::memcpy(dst + (prev_begin + j) * dim, src + prev[j],
                      sizeof(float) * dim);
        }
      }
      if (m == 0) break;
      prev_begin = b;
      prev_n = m;
    }
  });
  return Status::OK();
}

Status PullSparse(ClientContext& ctx, TableState& table,
                  std::span<const uint64_t> keys, std::span<float> out,
                  PullScratch& sc) {
  const KeyLocator& loc = table.locator;
  const uint32_t shards = loc.shards();
  const uint32_t dim = table.spec.dim();
  const size_t row_bytes = sizeof(float) * dim;
  sc.pairs.resize(shards);
  sc.unique.resize(shards);
  sc.plans.resize(shards);
  sc.buffers.resize(shards);
  sc.segments.resize(shards);
  for (auto& p : sc.pairs) p.clear();
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t row = loc.GlobalRow(keys[i]);
    const uint32_t s = loc.ShardOfRow(row);
    sc.pairs[s].push_back(
        PackRowIndex(static_cast<uint32_t>(row - loc.FirstRow(s)),
                     static_cast<uint32_t>(i)));
  }
  // A hole is read along when it costs less than a segment: a segment is a
  // descriptor on the wire plus a bounds check and a copy call at the
  // target, worth a few hundred bytes of plain reading.
  const uint32_t max_hole_rows = static_cast<uint32_t>(256 / row_bytes);
  std::vector<xfer::Request> requests;
  std::vector<uint32_t> request_shard;
  for (uint32_t s = 0; s < shards; ++s) {
    if (sc.pairs[s].empty()) continue;
    SortByRow(&sc.pairs[s], loc.RowsOf(s), &sc.sort_scratch);
    UniqueRows(sc.pairs[s], &sc.unique[s]);
    PlanReads(sc.unique[s], max_hole_rows, 8, &sc.plans[s]);
    sc.buffers[s].resize(sc.plans[s].buffer_rows * dim);
    PlanSegments(sc.plans[s], sc.buffers[s].data(), row_bytes, &sc.segments[s]);
    ServerLink& link = *ctx.servers[s];
    const xfer::RemoteRegion& region = link.rows_region.at(table.spec.id());
    std::span<const xfer::Segment> all = sc.segments[s];
    for (size_t b = 0; b < all.size(); b += kMaxSegmentsPerReadV) {
      requests.push_back(link.endpoint->PostReadV(
          all.subspan(b, std::min(kMaxSegmentsPerReadV, all.size() - b)),
          region));
      request_shard.push_back(s);
    }
  }
  Status first;
  for (size_t i = 0; i < requests.size(); ++i) {
    Status st = requests[i].Wait();
    if (first.ok() && !st.ok()) {
      first = st.WithContext(ctx.servers[request_shard[i]]->name +
                             ": rows of table " + table.spec.name());
    }
  }
  PS_RETURN_IF_ERROR(first);
  for (uint32_t s = 0; s < shards; ++s) {
    const ReadPlan& plan = sc.plans[s];
    const float* buf = sc.buffers[s].data();
    size_t k = 0;
    for (uint64_t p : sc.pairs[s]) {
      const uint32_t row = PackedRow(p);
      while (row >= plan.spans[k].first_row + uint64_t{plan.spans[k].rows}) ++k;
      const ReadPlan::Span& sp = plan.spans[k];
      std::memcpy(out.data() + size_t{PackedIndex(p)} * dim,
                  buf + (sp.buffer_row + row - sp.first_row) * dim, row_bytes);
    }
  }
  return Status::OK();
}

}  // namespace

Status PullRows(ClientContext& ctx, TableState& table,
                std::span<const uint64_t> keys, std::span<float> out) {
  const uint32_t dim = table.spec.dim();
  if (out.size() != keys.size() * dim) {
    return InvalidArgument("pull from table " + table.spec.name() +
                           ": room for " + std::to_string(out.size()) +
                           " values, " + std::to_string(keys.size()) +
                           " keys of dim " + std::to_string(dim) + " need " +
                           std::to_string(keys.size() * dim));
  }
  if (keys.size() > UINT32_MAX)
    return InvalidArgument("pull of more than 2^32 keys");
  if (table.locator.dense()) {
    for (uint64_t k : keys) {
      if (k >= table.locator.capacity()) {
        return InvalidArgument("key " + std::to_string(k) + " of DENSE table " +
                               table.spec.name() + " is past its " +
                               std::to_string(table.locator.capacity()) +
                               " rows");
      }
    }
  }
  if (keys.empty()) return Status::OK();
  std::unique_ptr<PullScratch> sc = table.TakePullScratch();
  Status s = keys.size() * 8 >= table.locator.capacity()
                 ? PullWhole(ctx, table, keys, out, *sc)
                 : PullSparse(ctx, table, keys, out, *sc);
  table.ReturnPullScratch(std::move(sc));
  return s;
}

Status PullWholeTable(ClientContext& ctx, TableState& table,
                      std::span<float> out) {
  const uint64_t n = table.locator.capacity() * table.spec.dim();
  if (out.size() != n) {
    return InvalidArgument("dense pull of table " + table.spec.name() +
                           " needs room for " + std::to_string(n) +
                           " values, got " + std::to_string(out.size()));
  }
  return ReadWholeShards(ctx, table, out.data());
}

}  // namespace ps::worker
