#include "client/pull_planner.h"

#include <algorithm>
#include <cstring>

namespace ps::worker {

// ReadV entries per request: the tcp transport takes at most 65536.
constexpr size_t kMaxSegmentsPerReadV = 16384;

// A pull whose reads are posted: Finish waits for them, copies the rows
// into the caller's buffer and gives the buffers back to the planner.
class PullPlanner::Pending final : public PendingOp::Rest {
 public:
  enum class Copy { kNone, kFromWhole, kFromSparse };
  Pending(PullPlanner& planner, std::unique_ptr<Scratch> sc, Copy copy,
          std::span<const uint64_t> keys, std::span<float> out)
      : planner_(planner),
        sc_(std::move(sc)),
        copy_(copy),
        keys_(keys),
        out_(out) {}
  ~Pending() override {
    if (sc_ != nullptr) (void)Finish();  // the reads write into sc_
  }

  Status Finish() override {
    Status s = planner_.WaitRequests(*sc_);
    if (s.ok() && copy_ == Copy::kFromWhole) {
      planner_.CopyFromWhole(keys_, out_, *sc_);
    } else if (s.ok() && copy_ == Copy::kFromSparse) {
      planner_.CopyFromSparse(out_, *sc_);
    }
    planner_.ReturnScratch(std::move(sc_));
    return s;
  }

 private:
  PullPlanner& planner_;
  std::unique_ptr<Scratch> sc_;
  const Copy copy_;
  const std::span<const uint64_t> keys_;
  const std::span<float> out_;
};

std::unique_ptr<PullPlanner::Scratch> PullPlanner::TakeScratch() {
  std::lock_guard<std::mutex> lock(mu_);
  if (scratch_pool_.empty()) return std::make_unique<Scratch>();
  auto s = std::move(scratch_pool_.back());
  scratch_pool_.pop_back();
  return s;
}

void PullPlanner::ReturnScratch(std::unique_ptr<Scratch> s) {
  std::lock_guard<std::mutex> lock(mu_);
  scratch_pool_.push_back(std::move(s));
}

void PullPlanner::PostWholeShards(float* dst, Scratch& sc) {
  const size_t row_bytes = sizeof(float) * spec_.dim();
  sc.requests.clear();
  sc.request_shard.clear();
  for (uint32_t s = 0; s < router_.shards(); ++s) {
    ServerLink& link = servers_[s];
    sc.requests.push_back(link.endpoint().PostGet(
        dst + router_.FirstRow(s) * spec_.dim(), router_.RowsOf(s) * row_bytes,
        link.rows(spec_.id()), 0));
    sc.request_shard.push_back(s);
  }
}

Status PullPlanner::WaitRequests(Scratch& sc) {
  Status first;
  for (size_t i = 0; i < sc.requests.size(); ++i) {
    Status st = sc.requests[i].Wait();
    if (first.ok() && !st.ok()) {
      first = st.WithContext(servers_[sc.request_shard[i]].name() +
                             ": rows of table " + spec_.name());
    }
  }
  sc.requests.clear();
  return first;
}

void PullPlanner::ForRange(size_t n,
                           const std::function<void(size_t, size_t)>& fn) {
  constexpr size_t kMinParallel = 1 << 16;
  if (n >= kMinParallel &&
      pool_.TryParallelFor(n, kMinParallel,
                           [&](size_t b, size_t e, int) { fn(b, e); })) {
    return;
  }
  fn(0, n);
}

void PullPlanner::CopyFromWhole(std::span<const uint64_t> keys,
                                std::span<float> out, const Scratch& sc) {
  const RowHash hash = router_.row_hash();
  const uint32_t dim = spec_.dim();
  const float* src = sc.table.data();
  float* dst = out.data();
  const uint64_t* k = keys.data();
  // Blocks of keys: the rows of block b are computed and prefetched while
  // block b - 1 is copied, so many misses are in flight at once.
  constexpr size_t kBlock = 16;
  ForRange(keys.size(), [&](size_t begin, size_t end) {
    uint64_t rows[2][kBlock];
    size_t prev_begin = begin, prev_n = 0;
    for (size_t b = begin;; b += kBlock) {
      const size_t m = b < end ? std::min(kBlock, end - b) : 0;
      uint64_t* cur = rows[((b - begin) / kBlock) & 1];
      hash.GlobalRows(k + b, m, cur);
      for (size_t j = 0; j < m; ++j) {
        cur[j] *= dim;
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
}

void PullPlanner::PostSparse(std::span<const uint64_t> keys, Scratch& sc) {
  const ShardRouter& loc = router_;
  const uint32_t shards = loc.shards();
  const uint32_t dim = spec_.dim();
  const size_t row_bytes = sizeof(float) * dim;
  sc.unique.resize(shards);
  sc.plans.resize(shards);
  sc.buffers.resize(shards);
  sc.segments.resize(shards);
  loc.SplitByShard(keys, &sc.pairs);
  // A hole is read along when it costs less than a segment: a segment is a
  // descriptor on the wire plus a bounds check and a copy call at the
  // target, worth a few hundred bytes of plain reading.
  const uint32_t max_hole_rows = static_cast<uint32_t>(256 / row_bytes);
  sc.requests.clear();
  sc.request_shard.clear();
  for (uint32_t s = 0; s < shards; ++s) {
    if (sc.pairs[s].empty()) continue;
    SortByRow(&sc.pairs[s], loc.RowsOf(s), &sc.sort_scratch);
    UniqueRows(sc.pairs[s], &sc.unique[s]);
    PlanReads(sc.unique[s], max_hole_rows, 8, &sc.plans[s]);
    sc.buffers[s].resize(sc.plans[s].buffer_rows * dim);
    PlanSegments(sc.plans[s], sc.buffers[s].data(), row_bytes, &sc.segments[s]);
    ServerLink& link = servers_[s];
    const xfer::RemoteRegion& region = link.rows(spec_.id());
    std::span<const xfer::Segment> all = sc.segments[s];
    for (size_t b = 0; b < all.size(); b += kMaxSegmentsPerReadV) {
      sc.requests.push_back(link.endpoint().PostReadV(
          all.subspan(b, std::min(kMaxSegmentsPerReadV, all.size() - b)),
          region));
      sc.request_shard.push_back(s);
    }
  }
}

void PullPlanner::CopyFromSparse(std::span<float> out,
                                 const Scratch& sc) const {
  const uint32_t dim = spec_.dim();
  const size_t row_bytes = sizeof(float) * dim;
  for (uint32_t s = 0; s < router_.shards(); ++s) {
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
}

PendingOp PullPlanner::Start(std::span<const uint64_t> keys,
                             std::span<float> out) {
  const uint32_t dim = spec_.dim();
  if (out.size() != keys.size() * dim) {
    return PendingOp(InvalidArgument(
        "pull from table " + spec_.name() + ": room for " +
        std::to_string(out.size()) + " values, " + std::to_string(keys.size()) +
        " keys of dim " + std::to_string(dim) + " need " +
        std::to_string(keys.size() * dim)));
  }
  if (keys.size() > UINT32_MAX) {
    return PendingOp(InvalidArgument("pull of more than 2^32 keys"));
  }
  if (Status s = router_.CheckDenseKeys(keys, spec_.name()); !s.ok()) {
    return PendingOp(s);
  }
  if (keys.empty()) return PendingOp();
  std::unique_ptr<Scratch> sc = TakeScratch();
  Pending::Copy copy;
  if (keys.size() * 8 >= router_.capacity()) {
    sc->table.Resize(router_.capacity() * dim);
    PostWholeShards(sc->table.data(), *sc);
    copy = Pending::Copy::kFromWhole;
  } else {
    PostSparse(keys, *sc);
    copy = Pending::Copy::kFromSparse;
  }
  return PendingOp(
      std::make_unique<Pending>(*this, std::move(sc), copy, keys, out));
}

PendingOp PullPlanner::StartWholeTable(std::span<float> out) {
  const uint64_t n = router_.capacity() * spec_.dim();
  if (out.size() != n) {
    return PendingOp(InvalidArgument(
        "dense pull of table " + spec_.name() + " needs room for " +
        std::to_string(n) + " values, got " + std::to_string(out.size())));
  }
  std::unique_ptr<Scratch> sc = TakeScratch();
  PostWholeShards(out.data(), *sc);
  return PendingOp(std::make_unique<Pending>(*this, std::move(sc),
                                             Pending::Copy::kNone,
                                             std::span<const uint64_t>(), out));
}

}  // namespace ps::worker
