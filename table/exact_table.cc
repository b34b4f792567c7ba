#include "table/exact_table.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "base/huge_pages.h"
#include "kernels/value_section.h"
#include "protocol/table_config.h"
#include "table/initializer.h"
#include "table/spilled_rows.h"

namespace ps::table {
namespace {

std::string Where(const proto::TableSpec& spec) {
  return "exact table '" + spec.name() + "' (id " + std::to_string(spec.id()) +
         ")";
}

// Counters per sketch row over the whole table: twice the bound, so that
// keys waiting for admission rarely share a counter, at most 2^25 (256 MB
// of sketches).
uint64_t SketchWidth(const proto::TableSpec& spec, int partitions) {
  if (spec.admit_after_pushes() <= 1) return 0;  // nothing to count
  const uint64_t total =
      std::min<uint64_t>(2 * spec.capacity(), uint64_t{1} << 25);
  return std::max<uint64_t>(total / partitions, 64);
}

}  // namespace

StatusOr<std::unique_ptr<ExactTable>> ExactTable::Create(
    const proto::TableSpec& spec) {
  return Create(spec, Options());
}

StatusOr<std::unique_ptr<ExactTable>> ExactTable::Create(
    const proto::TableSpec& spec, Options options) {
  if (spec.kind() != proto::EXACT) {
    return InvalidArgument("table '" + spec.name() + "' is not an EXACT table");
  }
  PS_RETURN_IF_ERROR(protocol::ValidateTableSpec(spec));
  PS_RETURN_IF_ERROR(ValidateInitializer(spec.initializer()));
  if (spec.capacity() >= ExactPartition::kNoRow) {
    return InvalidArgument(Where(spec) + ": capacity " +
                           std::to_string(spec.capacity()) +
                           " rows per shard exceeds 2^32 - 1");
  }
  std::unique_ptr<ColdRowStore> cold;
  if (spec.when_full() == proto::WHEN_FULL_MOVE_TO_DISK) {
    if (!options.open_disk_tier) {
      return InvalidArgument(
          Where(spec) +
          ": when_full: WHEN_FULL_MOVE_TO_DISK needs a folder for the disk "
          "tier (ps_server --disk_tier_dir)");
    }
    auto store = options.open_disk_tier(ExactPartition::ColdRecordBytes(
        spec.dim(), OptimizerState(spec).arrays()));
    if (!store.ok()) return store.status().WithContext(Where(spec));
    cold = std::move(*store);
  }
  SecondsClock& clock = options.clock;
  if (!clock) {
    const auto start = std::chrono::steady_clock::now();
    clock = [start] {
      return static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::seconds>(
              std::chrono::steady_clock::now() - start)
              .count());
    };
  }
  int threads = options.threads;
  if (threads <= 0) {
    threads = static_cast<int>(std::thread::hardware_concurrency());
  }
  threads = std::clamp(threads, 1, kMaxThreads);
  return std::unique_ptr<ExactTable>(new ExactTable(
      spec, std::move(clock), std::move(cold), threads, options.index_spares));
}

ExactTable::ExactTable(const proto::TableSpec& spec, SecondsClock clock,
                       std::unique_ptr<ColdRowStore> cold, int threads,
                       std::optional<IndexSpares::Sizes> index_spares)
    : Table(spec),
      dim_(spec.dim()),
      state_arrays_(OptimizerState(spec).arrays()),
      clock_(std::move(clock)),
      budget_(spec.capacity()),
      cold_(std::move(cold)),
      spares_(index_spares ? std::make_unique<IndexSpares>(*index_spares)
                           : nullptr),
      helpers_(threads > 1 ? std::make_unique<kernels::ThreadPool>(threads)
                           : nullptr) {
  const uint64_t width = SketchWidth(spec, kPartitions);
  auto reclaim = [this](const ExactPartition& asking, uint64_t update) {
    return FreeOlderRow(asking, update);
  };
  for (int p = 0; p < kPartitions; ++p) {
    partitions_[p] = std::make_unique<ExactPartition>(
        this->spec(), &budget_, width, static_cast<double>(p) / kPartitions,
        reclaim, cold_.get(), spares_.get());
  }
}

bool ExactTable::FreeOlderRow(const ExactPartition& asking, uint64_t update) {
  // The partitions' victims' last updates are read without their locks: a
  // row updated meanwhile makes this pick a partition whose victim is a
  // little newer than the oldest, which the approximate LRU allows.
  ExactPartition* oldest = nullptr;
  for (const auto& p : partitions_) {
    const uint64_t u = p->oldest_update();
    if (p.get() != &asking && u < update) {
      update = u;
      oldest = p.get();
    }
  }
  return oldest != nullptr && oldest->TryRetireOldest();
}

void ExactTable::Group(std::span<const uint64_t> keys, Grouped* out) {
  // A counting sort by partition: stable, so each partition sees its keys
  // in the push's order (duplicates of a key apply in turn).
  out->own_hashes.resize(keys.size());
  out->hashes = out->own_hashes;
  uint32_t count[kPartitions] = {};
  for (size_t i = 0; i < keys.size(); ++i) {
    out->own_hashes[i] = RowIndex::Mix(keys[i]);
    ++count[PartitionIndex(out->own_hashes[i])];
  }
  out->begin[0] = 0;
  for (int p = 0; p < kPartitions; ++p) {
    out->begin[p + 1] = out->begin[p] + count[p];
  }
  out->positions.resize(keys.size());
  uint32_t next[kPartitions];
  std::copy_n(out->begin, kPartitions, next);
  for (size_t i = 0; i < keys.size(); ++i) {
    out->positions[next[PartitionIndex(out->hashes[i])]++] =
        static_cast<uint32_t>(i);
  }
}

void ExactTable::GroupInHashOrder(std::span<const uint64_t> hashes,
                                  Grouped* out) {
  // A partition is a stretch of the hashes (their top bits): where each
  // begins is a binary search, and the positions are in order.
  out->hashes = hashes;
  out->positions.resize(hashes.size());
  std::iota(out->positions.begin(), out->positions.end(), 0u);
  for (int p = 0; p < kPartitions; ++p) {
    const auto before = [p](uint64_t h) {
      return PartitionIndex(h) < static_cast<size_t>(p);
    };
    out->begin[p] = static_cast<uint32_t>(
        std::partition_point(hashes.begin(), hashes.end(), before) -
        hashes.begin());
  }
  out->begin[kPartitions] = static_cast<uint32_t>(hashes.size());
}

PartitionKeys ExactTable::Part(const Grouped& g, int p,
                               std::span<const uint64_t> keys,
                               std::span<const float> values) {
  const size_t b = g.begin[p], n = g.begin[p + 1] - b;
  return PartitionKeys{
      .keys = keys,
      .values = values,
      .positions = std::span<const uint32_t>(g.positions).subspan(b, n),
      .hashes = g.hashes};
}

void ExactTable::Sweep(uint64_t step, uint32_t now_s) {
  // Claims the sweep of this step (or second) unless one of a newer one
  // was claimed already.
  auto claim = [](auto& swept, auto now) {
    auto seen = swept.load();
    do {
      if (now <= seen) return false;
    } while (!swept.compare_exchange_weak(seen, now));
    return true;
  };
  const bool by_step =
      spec().evict_after_steps() != 0 && claim(swept_step_, step);
  const bool by_time =
      spec().evict_after_seconds() != 0 && claim(swept_second_, now_s);
  if (!by_step && !by_time) return;
  for (auto& p : partitions_) p->EvictIdle(step, now_s);
  if (cold_ != nullptr) SweepDisk(step, now_s);
}

void ExactTable::SweepDisk(uint64_t step, uint32_t now_s) {
  std::unique_lock sweeping(disk_sweep_mu_, std::try_to_lock);
  if (!sweeping.owns_lock()) return;
  // The keys first, then each checked under its partition's lock (the
  // scan holds none: a row may move meanwhile).
  std::vector<uint64_t> keys;
  keys.reserve(kDiskSweepRows);
  auto next = cold_->ForEachFrom(
      disk_sweep_from_, kDiskSweepRows,
      [&](uint64_t key, std::span<const std::byte>) { keys.push_back(key); });
  if (!next.ok()) {
    LOG_EVERY_N(ERROR, 100)
        << Where(spec()) << ": disk tier sweep: " << next.status();
    return;
  }
  disk_sweep_from_ = next->value_or(0);  // round again from the start
  for (uint64_t key : keys) {
    Status s = PartitionOf(key).EvictIdleOnDisk(key, step, now_s);
    if (!s.ok()) {
      LOG_EVERY_N(ERROR, 100) << Where(spec()) << ": disk tier sweep: " << s;
      return;
    }
  }
}

Status ExactTable::CheckPush(std::span<const uint64_t> keys,
                             std::span<const float> values) const {
  if (values.size() != keys.size() * dim_) {
    return InvalidArgument(Where(spec()) + ": " + std::to_string(keys.size()) +
                           " keys of dim " + std::to_string(dim_) + " need " +
                           std::to_string(keys.size() * dim_) +
                           " values, got " + std::to_string(values.size()));
  }
  if (keys.size() >= UINT32_MAX) {
    return InvalidArgument(Where(spec()) + ": more than 2^32 keys in a push");
  }
  if (!kernels::AllFinite(values.data(), values.size())) {
    return InvalidArgument(Where(spec()) + ": push carries a non-finite value");
  }
  return Status::OK();
}

Status ExactTable::ApplyKeys(uint64_t step, std::span<const uint64_t> keys,
                             std::span<const float> values) {
  PS_RETURN_IF_ERROR(CheckPush(keys, values));
  Grouped g;
  Group(keys, &g);
  return ApplyGrouped(step, keys, values, g);
}

Status ExactTable::ApplyHashedKeys(uint64_t step,
                                   std::span<const uint64_t> keys,
                                   std::span<const uint64_t> hashes,
                                   std::span<const float> values) {
  PS_RETURN_IF_ERROR(CheckPush(keys, values));
  if (hashes.size() != keys.size()) {
    return InvalidArgument(Where(spec()) + ": " + std::to_string(keys.size()) +
                           " keys with " + std::to_string(hashes.size()) +
                           " hashes");
  }
  DCHECK(std::is_sorted(hashes.begin(), hashes.end()));
  Grouped g;
  GroupInHashOrder(hashes, &g);
  return ApplyGrouped(step, keys, values, g);
}

Status ExactTable::ApplyGrouped(uint64_t step, std::span<const uint64_t> keys,
                                std::span<const float> values,
                                const Grouped& g) {
  // The clock is read only for a table that evicts by it.
  const uint32_t now_s = spec().evict_after_seconds() != 0 ? NowSeconds() : 0;
  std::shared_lock applying(applies_mu_);
  Sweep(step, now_s);
  // One optimizer step per push, taken by the first partition that applies
  // (on whichever thread).
  std::once_flag step_taken;
  uint64_t optimizer_step = 0;
  auto take_step = [&] {
    std::call_once(step_taken,
                   [&] { optimizer_step = optimizer_steps_.fetch_add(1) + 1; });
    return optimizer_step;
  };
  return Split(kPartitions, keys.size(), [&](size_t begin, size_t end) {
    Status first;
    for (size_t p = begin; p < end; ++p) {
      if (g.begin[p] == g.begin[p + 1]) continue;
      Status s = partitions_[p]->Apply(step, now_s, Part(g, p, keys, values),
                                       take_step);
      if (first.ok()) first = s;
    }
    return first;
  });
}

Status ExactTable::Split(
    size_t n, size_t keys,
    const std::function<Status(size_t, size_t)>& fn) const {
  constexpr size_t kKeyBytes = sizeof(uint64_t);
  const size_t bytes = keys * (kKeyBytes + sizeof(float) * dim_);
  if (n < 2 || helpers_ == nullptr || cold_ != nullptr ||
      bytes < kParallelKeys * (kKeyBytes + sizeof(float)) ||
      helpers_busy_.exchange(true, std::memory_order_acquire)) {
    return fn(0, n);
  }
  // The items are claimed one at a time by whichever thread is free, so
  // that a slow one (a partition whose index grows) holds up no other.
  std::atomic<size_t> next{0};
  struct Failure {
    size_t at = SIZE_MAX;
    Status status;
  };
  Failure failures[kMaxThreads];  // each thread's first, by item
  helpers_->ParallelFor(
      static_cast<size_t>(helpers_->size()), 1,
      [&](size_t, size_t, int thread) {
        for (size_t i;
             (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
          Status s = fn(i, i + 1);
          if (!s.ok() && i < failures[thread].at) failures[thread] = {i, s};
        }
      });
  helpers_busy_.store(false, std::memory_order_release);
  const Failure* first = &failures[0];
  for (const Failure& f : failures) {
    if (f.at < first->at) first = &f;
  }
  return first->status;
}

Status ExactTable::ReadKeys(std::span<const uint64_t> keys,
                            std::span<float> out,
                            std::span<bool> present) const {
  if (out.size() != keys.size() * dim_ || present.size() != keys.size() ||
      keys.size() >= UINT32_MAX) {
    return InvalidArgument(Where(spec()) + ": pull of " +
                           std::to_string(keys.size()) +
                           " keys given buffers of the wrong size");
  }
  // Ranges of whole chunks (ReadRange) on the table's threads; with a disk
  // tier on this thread alone (Split), its misses read together.
  const size_t chunks = (keys.size() + kReadChunk - 1) / kReadChunk;
  return Split(chunks, keys.size(), [&](size_t begin, size_t end) {
    return ReadRange(keys, out, present, begin * kReadChunk,
                     std::min(keys.size(), end * kReadChunk));
  });
}

Status ExactTable::ReadRange(std::span<const uint64_t> keys,
                             std::span<float> out, std::span<bool> present,
                             size_t from, size_t to) const {
  // Chunks of keys in their order, every partition locked shared for a
  // chunk: no grouping pass, output written in order, and an apply waits
  // for at most one chunk. Two passes per chunk: the first resolves keys to
  // rows (index slots prefetched ahead) and prefetches the rows, the second
  // copies them, by then in cache whatever order the rows lie in.
  const float* rows[kReadChunk];
  uint64_t hashes[kReadChunk];
  //
  // With a disk tier, misses gather over chunks and are read from disk
  // together after the last chunk's locks are gone (ReadMissesFromDisk):
  // the more reads one GetMany has, the more it keeps in flight, and a
  // step's thousands of misses wait for the disk once, not once per chunk.
  // Gathering stops at a chunk's end once kMaxMissBytes of records are due:
  // that bounds the memory a pull of millions of keys on disk takes, and
  // the rows each partition then brings back under its lock.
  constexpr size_t kMaxMissBytes = 16 << 20;
  const size_t max_misses =
      cold_ == nullptr
          ? 0
          : std::max<size_t>(1, kMaxMissBytes / cold_->record_bytes());
  ColdMisses misses;
  for (size_t begin = from; begin < to; begin += kReadChunk) {
    const size_t n = std::min(to - begin, kReadChunk);
    const uint64_t* chunk = keys.data() + begin;
    for (size_t i = 0; i < n; ++i) hashes[i] = RowIndex::Mix(chunk[i]);
    std::shared_lock<std::shared_mutex> locks[kPartitions];
    for (int p = 0; p < kPartitions; ++p) {
      locks[p] = std::shared_lock(partitions_[p]->lock());
    }
    const bool streams = ExactPartition::Streams(
        n, [&](size_t i) { return hashes[i]; }, budget_.used());
    const size_t key_ahead = streams ? 0 : ExactPartition::kKeyAhead;
    for (size_t i = 0; i < std::min(n, RowIndex::kPrefetchAhead); ++i) {
      Partition(hashes[i]).PrefetchLocked(hashes[i]);
    }
    for (size_t i = 0; i < std::min(n, key_ahead); ++i) {
      Partition(hashes[i]).PrefetchKeyLocked(hashes[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      if (i + RowIndex::kPrefetchAhead < n) {
        const uint64_t ahead = hashes[i + RowIndex::kPrefetchAhead];
        Partition(ahead).PrefetchLocked(ahead);
      }
      if (key_ahead != 0 && i + key_ahead < n) {
        const uint64_t ahead = hashes[i + key_ahead];
        Partition(ahead).PrefetchKeyLocked(ahead);
      }
      rows[i] = Partition(hashes[i]).FindLocked(chunk[i], hashes[i], streams);
      if (rows[i] != nullptr) __builtin_prefetch(rows[i]);
    }
    size_t hits = 0;
    for (size_t i = 0; i < n; ++i) {
      float* dst = out.data() + (begin + i) * dim_;
      present[begin + i] = rows[i] != nullptr;
      hits += rows[i] != nullptr;
      if (rows[i] != nullptr) {
        // A loop, not std::copy_n: rows are a few floats, and a call to
        // memmove per row cost more than the copy.
        for (uint32_t j = 0; j < dim_; ++j) dst[j] = rows[i][j];
      } else {
        std::fill_n(dst, dim_, 0.0f);
        if (cold_ != nullptr) {
          misses.at.push_back(static_cast<uint32_t>(begin + i));
          misses.keys.push_back(chunk[i]);
        }
      }
    }
    pull_memory_hits_.fetch_add(hits, std::memory_order_relaxed);
    for (auto& lock : locks) lock.unlock();
    const bool last = begin + n == to;
    if (!misses.at.empty() && (last || misses.at.size() >= max_misses)) {
      PS_RETURN_IF_ERROR(ReadMissesFromDisk(keys, out, present, &misses));
      misses.Clear();
    }
  }
  return Status::OK();
}

Status ExactTable::ReadMissesFromDisk(std::span<const uint64_t> keys,
                                      std::span<float> out,
                                      std::span<bool> present,
                                      ColdMisses* misses) const {
  // Read together, without locks (many reads in flight: the disk's pace,
  // not one read's latency). A record found is the key's row as it
  // was at the read (a key moves under its partition's lock, and while it
  // moves both copies are equal), so a pull may return it.
  const size_t record_bytes = cold_->record_bytes();
  const size_t n = misses->at.size();
  std::vector<std::byte> records(n * record_bytes);
  std::vector<uint8_t> found(n);
  // Each partition's deletes so far, taken just before the read: what
  // BringBack checks a record against (ExactPartition::disk_deletes_locked).
  uint64_t deletes[kPartitions];
  for (int p = 0; p < kPartitions; ++p) {
    std::shared_lock lock(partitions_[p]->lock());
    deletes[p] = partitions_[p]->disk_deletes_locked();
  }
  PS_RETURN_IF_ERROR(cold_->GetMany(misses->keys, records, found));
  std::vector<ExactPartition::PulledRow> pulled;
  for (size_t m = 0; m < n; ++m) {
    const uint32_t at = misses->at[m];
    const std::span<float> dst(out.data() + uint64_t{at} * dim_, dim_);
    const std::span<const std::byte> record(records.data() + m * record_bytes,
                                            record_bytes);
    if (found[m]) {
      const ExactPartition::ColdRow row =
          ExactPartition::ViewColdRecord(record, dim_, state_arrays_);
      std::copy_n(row.values, dim_, dst.data());
      present[at] = true;
      const uint64_t hash = RowIndex::Mix(keys[at]);
      pulled.push_back({.key = keys[at],
                        .hash = hash,
                        .record = record,
                        .disk_deletes = deletes[PartitionIndex(hash)]});
      continue;
    }
    // Not on disk: a new key, or one that came back into memory (or went
    // out again) since its chunk looked. Looked for again, under its
    // partition's lock.
    const uint64_t hash = RowIndex::Mix(keys[at]);
    ExactPartition& p = Partition(hash);
    std::shared_lock lock(p.lock());
    if (const float* row = p.FindLocked(keys[at], hash)) {
      std::copy_n(row, dim_, dst.data());
      present[at] = true;
      continue;
    }
    PS_ASSIGN_OR_RETURN(present[at], p.ReadColdLocked(keys[at], dst));
    pull_disk_hits_.fetch_add(present[at], std::memory_order_relaxed);
  }
  pull_disk_hits_.fetch_add(pulled.size(), std::memory_order_relaxed);
  BringBack(&pulled);
  return Status::OK();
}

void ExactTable::BringBack(
    std::vector<ExactPartition::PulledRow>* pulled) const {
  // Moves are what snapshots and restores exclude; while one runs the rows
  // stay on disk (this pull has read them already).
  std::shared_lock applying(applies_mu_, std::try_to_lock);
  if (!applying.owns_lock() || pulled->empty()) return;
  std::stable_sort(pulled->begin(), pulled->end(),
                   [](const auto& a, const auto& b) {
                     return PartitionIndex(a.hash) < PartitionIndex(b.hash);
                   });
  for (size_t b = 0; b < pulled->size();) {
    ExactPartition& p = Partition((*pulled)[b].hash);
    size_t e = b + 1;
    while (e < pulled->size() && &Partition((*pulled)[e].hash) == &p) ++e;
    const Status s =
        p.BringBack(std::span(pulled->data() + b, pulled->data() + e));
    if (!s.ok()) {
      // The rows stay on disk, where the next pull or push finds them.
      LOG_EVERY_N(ERROR, 1000)
          << Where(spec()) << ": cannot bring pulled rows back: " << s;
    }
    b = e;
  }
}

bool ExactTable::HasRow(uint64_t key) const {
  return PartitionOf(key).HasRow(key);
}

TableCounters ExactTable::counters() const {
  TableCounters total;
  for (const auto& p : partitions_) total += p->counters();
  if (cold_ != nullptr) {
    total.disk_bytes_written = cold_->bytes_written();
    total.disk_bytes_read = cold_->bytes_read();
  }
  total.memory_hits += pull_memory_hits_.load(std::memory_order_relaxed);
  total.disk_hits += pull_disk_hits_.load(std::memory_order_relaxed);
  return total;
}

uint64_t ExactTable::bytes() const {
  uint64_t sketches = 0;
  for (const auto& p : partitions_) sketches += p->sketch_bytes();
  return budget_.bound() * dim_ * sizeof(float) * (1 + state_arrays_) +
         sketches;
}

std::string ExactTable::Placement() const {
  return "at most " + Table::Placement();
}

Status ExactTable::Snapshot(TableSnapshot* out) const {
  std::unique_lock no_applies(applies_mu_);
  out->ids.clear();
  out->values.clear();
  for (auto& state : out->state) state.clear();
  out->last_update.clear();
  out->state_arrays = state_arrays_;
  out->optimizer_steps = optimizer_steps_.load();
  out->clock_s = NowSeconds();
  out->uncopied = nullptr;
  out->spilled = nullptr;
  if (cold_ == nullptr) {
    CopyRowsInMemory(out);
    return Status::OK();
  }
  // The rows on disk stay there: their files as they are now (no apply
  // moves a row until this returns) are linked, not copied. Linking writes
  // out RocksDB's memtable first; where the disk cannot take it (full),
  // a view pinned now serves instead, and the checkpoint writes the rows.
  StatusOr<std::shared_ptr<const ColdRowFiles>> files = cold_->Link();
  std::shared_ptr<const ColdRowView> view;
  if (!files.ok()) {
    LOG(WARNING) << Where(spec()) << ": " << files.status()
                 << "; this checkpoint writes the rows on disk instead of "
                    "linking their files";
    PS_ASSIGN_OR_RETURN(view, cold_->Pin());
  }
  // The rows in memory may be most of the server's memory: they go to a
  // file on the tier's disk, not into a copy. A spill that fails fails the
  // cut (a copy might not fit); the table goes on as it was.
  if (files.ok()) {
    const auto started = std::chrono::steady_clock::now();
    StatusOr<std::shared_ptr<const SpilledRows>> spilled = SpillRowsInMemory();
    if (!spilled.ok()) {
      return spilled.status().WithContext(
          Where(spec()) + ": cannot write the rows in memory at the cut");
    }
    LOG(INFO) << Where(spec()) << ": " << (*spilled)->rows()
              << " rows in memory written at the cut ("
              << (*spilled)->bytes() / (1 << 20) << " MiB, "
              << std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - started)
                     .count()
              << " s)";
    out->spilled = *std::move(spilled);
  } else {
    CopyRowsInMemory(out);
  }
  out->uncopied =
      std::make_shared<RowsOnDisk>(files.ok() ? *std::move(files) : nullptr,
                                   std::move(view), dim_, state_arrays_);
  return Status::OK();
}

void ExactTable::CopyRowsInMemory(TableSnapshot* out) const {
  // Sized once (growing by doubling would copy the rows again and take up
  // to twice their memory at the end), on huge pages (base/huge_pages.h).
  uint64_t rows = 0;
  for (const auto& p : partitions_) rows += p->counters().rows;
  ReserveOnHugePages(&out->ids, rows);
  ReserveOnHugePages(&out->values, rows * dim_);
  for (int k = 0; k < state_arrays_; ++k) {
    ReserveOnHugePages(&out->state[k], rows * dim_);
  }
  ReserveOnHugePages(&out->last_update, rows);
  for (const auto& p : partitions_) {
    std::shared_lock lock(p->lock());
    p->ForEachRowLocked([&](uint64_t key, const float* values,
                            const float* const* state, uint64_t last_update) {
      out->ids.push_back(key);
      out->values.insert(out->values.end(), values, values + dim_);
      for (int k = 0; k < state_arrays_; ++k) {
        out->state[k].insert(out->state[k].end(), state[k], state[k] + dim_);
      }
      out->last_update.push_back(last_update);
    });
  }
}

StatusOr<std::shared_ptr<const SpilledRows>> ExactTable::SpillRowsInMemory()
    const {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<RowSpill> spill,
                      RowSpill::Create(cold_->where(), dim_, state_arrays_));
  // One run per partition, sorted there: the only memory this takes is a
  // partition's row pointers.
  struct RowAt {
    uint64_t key;
    const float* values;
    const float* state[kernels::kMaxOptimizerStates];
    uint64_t last_update;
  };
  std::vector<RowAt> rows;
  for (const auto& p : partitions_) {
    std::shared_lock lock(p->lock());
    rows.clear();
    p->ForEachRowLocked([&](uint64_t key, const float* values,
                            const float* const* state, uint64_t last_update) {
      RowAt& r = rows.emplace_back();
      r.key = key;
      r.values = values;
      std::copy_n(state, kernels::kMaxOptimizerStates, r.state);
      r.last_update = last_update;
    });
    std::sort(rows.begin(), rows.end(),
              [](const RowAt& a, const RowAt& b) { return a.key < b.key; });
    for (const RowAt& r : rows) {
      PS_RETURN_IF_ERROR(
          spill->Append(r.key, r.values, r.state, r.last_update));
    }
    spill->EndRun();
  }
  return spill->Finish();
}

Status ExactTable::RowsOnDisk::PlaceAt(
    const std::string& dir, const std::vector<std::string>& earlier) const {
  if (files_ == nullptr) {
    return Internal("the rows on disk were not linked at the cut");
  }
  return files_->PlaceAt(dir, earlier);
}

Status ExactTable::RowsOnDisk::ForEach(const RowFn& fn) const {
  // RocksDB's buffers need not be 4-byte aligned: each record is copied.
  std::vector<std::byte> aligned;
  const ColdRecordFn decode = [&](uint64_t key,
                                  std::span<const std::byte> record) {
    aligned.assign(record.begin(), record.end());
    const ExactPartition::ColdRow row =
        ExactPartition::ViewColdRecord(aligned, dim_, state_arrays_);
    fn(key, row.values, row.state, row.last_update);
  };
  return files_ != nullptr ? files_->ForEach(decode) : view_->ForEach(decode);
}

Status ExactTable::PrepareRestore(TableTarget* target) {
  target->state_arrays = state_arrays_;
  if (cold_ == nullptr) return Status::OK();
  // The rows stream to disk as they are read: a table with a disk tier may
  // hold more rows than memory. An earlier attempt's rows go first.
  restore_sink_ = std::make_unique<StreamedRestore>(this);
  PS_RETURN_IF_ERROR(restore_sink_->Clear());
  target->exact_sink = restore_sink_.get();
  return Status::OK();
}

Status ExactTable::FreeAllRows() {
  for (auto& p : partitions_) {
    std::unique_lock lock(p->lock());
    p->FreeAllRowsLocked();
  }
  if (cold_ == nullptr) return Status::OK();
  const Status cleared = cold_->Clear();
  // Counted again once the records are gone: a pull that took a
  // partition's count after its rows were freed may have read a record the
  // clear then deleted, and must not bring it back.
  for (auto& p : partitions_) {
    std::unique_lock lock(p->lock());
    p->CountDiskClearLocked();
  }
  return cleared;
}

Status ExactTable::StreamedRestore::Clear() {
  rows_ = 0;
  return table_->FreeAllRows().WithContext("restoring " +
                                           Where(table_->spec()));
}

Status ExactTable::StreamedRestore::Put(uint64_t key, const float* values,
                                        const float* const* state,
                                        uint64_t last_update) {
  ExactPartition& p = table_->PartitionOf(key);
  std::unique_lock lock(p.lock());
  PS_RETURN_IF_ERROR(p.RestoreColdRowLocked(key, values, state, last_update,
                                            table_->NowSeconds())
                         .WithContext("restoring " + Where(table_->spec())));
  ++rows_;
  return Status::OK();
}

void ExactTable::StreamedRestore::ContinueClock(uint32_t saved_s) {
  table_->ContinueClock(saved_s);
}

Status ExactTable::StreamedRestore::Adopt(const std::string& dir) {
  PS_RETURN_IF_ERROR(Clear());
  return table_->cold_->Adopt(dir).WithContext("restoring " +
                                               Where(table_->spec()));
}

Status ExactTable::StreamedRestore::CountAdopted(uint64_t key) {
  ExactPartition& p = table_->PartitionOf(key);
  std::unique_lock lock(p.lock());
  p.CountAdoptedRowLocked();
  ++rows_;
  return Status::OK();
}

Status ExactTable::StreamedRestore::Delete(uint64_t key) {
  ExactPartition& p = table_->PartitionOf(key);
  std::unique_lock lock(p.lock());
  PS_ASSIGN_OR_RETURN(const bool deleted, p.DeleteColdRowLocked(key));
  if (deleted) --rows_;
  return Status::OK();
}

Status ExactTable::FinishRestore(TableTarget* target) {
  const TableSnapshot& saved = target->exact;
  ContinueClock(target->clock_s);  // before rows are touched at now
  if (target->exact_sink != nullptr && saved.ids.empty()) {
    // Streamed: every row is on disk already, and comes back into memory
    // when it is pushed or pulled.
    std::unique_lock no_applies(applies_mu_);
    optimizer_steps_.store(target->optimizer_steps);
    swept_step_.store(0);
    swept_second_.store(0);
    return Status::OK();
  }
  if (saved.ids.size() > budget_.bound() && cold_ == nullptr) {
    return ResourceExhausted(
        "restoring " + Where(spec()) + ": " + std::to_string(saved.ids.size()) +
        " keys exceed its capacity of " + std::to_string(budget_.bound()) +
        " rows per shard");
  }
  // No apply runs meanwhile. The rows fit the bound (checked above) and
  // all are freed first, so no restore takes a row from a full budget.
  std::unique_lock no_applies(applies_mu_);
  // An earlier candidate's rows must not stay.
  PS_RETURN_IF_ERROR(FreeAllRows().WithContext("restoring " + Where(spec())));
  // Oldest first, so that the rows' uses come out in the order of their
  // last updates (the victims at the bound are the oldest).
  std::vector<size_t> order(saved.ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return saved.last_update[a] < saved.last_update[b];
  });
  const float* state[kernels::kMaxOptimizerStates] = {};
  const uint32_t now_s = NowSeconds();
  // With a disk tier, the rows beyond the bound (the oldest) go to disk.
  const size_t to_disk =
      saved.ids.size() - std::min<size_t>(saved.ids.size(), budget_.bound());
  for (size_t n = 0; n < order.size(); ++n) {
    const size_t i = order[n];
    for (int k = 0; k < state_arrays_; ++k)
      state[k] = &saved.state[k][i * dim_];
    ExactPartition& p = PartitionOf(saved.ids[i]);
    std::unique_lock lock(p.lock());
    if (n < to_disk) {
      Status s = p.RestoreColdRowLocked(saved.ids[i], &saved.values[i * dim_],
                                        state, saved.last_update[i], now_s);
      if (!s.ok()) {
        lock.unlock();
        (void)FreeAllRows();  // the first error is the one to report
        return s.WithContext("restoring " + Where(spec()));
      }
    } else if (!p.RestoreRowLocked(saved.ids[i], &saved.values[i * dim_], state,
                                   saved.last_update[i], now_s)) {
      lock.unlock();
      (void)FreeAllRows();
      return ResourceExhausted("restoring " + Where(spec()) +
                               ": no memory for key " +
                               std::to_string(saved.ids[i]));
    }
  }
  optimizer_steps_.store(target->optimizer_steps);
  swept_step_.store(0);
  swept_second_.store(0);
  return Status::OK();
}

void ExactTable::ContinueClock(uint32_t saved_s) {
  // Set, not added: a restore that falls back to an older checkpoint sets
  // it again from that one's.
  const uint64_t own = clock_();
  clock_offset_.store(saved_s > own ? saved_s - own : 0);
}

}  // namespace ps::table
