// ExactTable: one shard of an EXACT table, for key spaces too large or too
// open for the hashing trick. Its keys are split over kPartitions
// partitions by the high bits of their hash (table/exact_partition.h), each
// with its own key -> row index (table/row_index.h), rows and lock:
//
// - Admission: a key gets a row at its admit_after_pushes-th push (counted
//   per key occurrence); the gradients of earlier pushes are dropped and
//   counted. The counts live in a bounded count-min sketch per partition
//   (table/admission_sketch.h: 16 bytes per row of the bound, however
//   many distinct keys arrive, aged so that a key must be frequent lately);
//   a key may be admitted a push early when it shares every counter with
//   others. Rare keys, most of a CTR key space, so never take a row.
// - Optimizer steps: one per ApplyKeys call, i.e. per keyed packet (a push
//   of many keys may span packets), as HASHED tables count per packet when
//   they do not fold steps.
// - Eviction by age: every push carries the worker's step; rows whose last
//   update is more than evict_after_steps older are freed by a sweep that
//   goes round each partition's rows: at the first push of a newer step
//   than any before, in all partitions, a share that makes a round in
//   evict_after_steps steps (at least 4,096 rows); and at each push, in the
//   partitions it touches, one row per key and 64 more. So an idle row is
//   freed within evict_after_steps steps more, at once in a partition of
//   up to 4,096 rows, and the sweep costs O(keys pushed), not O(rows) a
//   step. Likewise by wall-clock age: rows not updated for more than
//   evict_after_seconds seconds of the table's clock (a steady clock,
//   seconds since the table was made; restored rows count as updated when
//   restored), a round in evict_after_seconds seconds from the first push
//   of each newer second. A table nobody pushes to keeps its rows until the
//   next push.
// - Memory bound: at most `capacity` rows in use over all partitions
//   (TableSpec.capacity is per shard for EXACT tables). Reaching it is
//   logged once, clearly. Then, by when_full: a new key takes the least
//   recently used row of the shard, approximately (the default, counted as
//   evicted: its partition's victim, the least recently used of the 32
//   rows its hand comes to next, or another partition's when that one was
//   updated earlier, found by each partition's published victim's last
//   update and taken only if that partition's lock is free), or is not
//   admitted (counted) until eviction by age frees rows, or (a disk tier)
//   takes that row after it moved, with its optimizer state and last
//   update, to the table's ColdRowStore (table/cold_row_store.h). A new
//   key whose partition has no row to free while every partition that has
//   one is busy takes a row beyond the bound instead of waiting (which
//   could wait for a thread that waits for it) or being refused; every
//   push then frees (or moves out) its partition's rows while the shard is
//   over its bound, so the excess lasts only while partitions contend.
// - Disk tier (when_full: WHEN_FULL_MOVE_TO_DISK, Options::open_disk_tier):
//   the bound is what stays in memory; the rest of the rows wait on disk.
//   A push of a key whose row is on disk brings it back (moving another
//   out if the bound says so) and applies it there. A pull reads the rows
//   it misses from disk, all at once and without locks (the store keeps
//   many reads in flight), and then brings them back as a push would,
//   their last update unchanged: the push that follows a pull in training
//   finds them in memory. Eviction by age deletes a row from
//   either tier: from memory as above; from disk when its key is next
//   pushed, or when a sweep comes by: each newer step (or second) reads
//   kDiskSweepRows more rows on disk, in key order, round and round, and
//   deletes the idle ones (until then a row is read and checkpointed as it
//   was).
//   Snapshots hold the rows of both tiers (those on disk as a view of the
//   disk tier pinned at the cut, not copied); restores fill memory with the
//   most recently updated rows and put the rest on disk.
//
// Rows live in local memory, not in registered memory: workers reach exact
// rows only through the server (RowAccess::kThroughServer), because only
// the server knows where a key's row is. Pushes arrive as keyed packets in
// the inboxes (the apply threads call ApplyKeys), pulls as lookup packets
// in the same inboxes (ReadKeys into the worker's reply region:
// protocol/lookup_packet.h; tools and workers of older builds may still ask
// with an ExactPull request on the control channel). Storage grows with
// the rows in use, up to the bound.
//
// ExactTable is a Table (table/table.h): ApplyKeys and ReadKeys; its
// checkpoints are its keys with their rows, state and last update.
//
// Thread-safe, without a table-wide lock for applies and reads: a call
// locks the partitions of its keys one at a time (readers shared, applies
// exclusive), so apply threads and readers of other partitions go on. A
// snapshot or restore excludes every apply for its duration (a table-wide
// shared mutex that applies take shared), and then takes the partitions'
// locks one at a time: it sees no row change or move, never holds 64 locks
// and RocksDB's at once, and lets reads go on. A restore is not atomic for
// those reads (the server restores before it serves). A large call also
// uses the table's own helper threads (Options::threads, kParallelKeys),
// which take its partitions or chunks as the calling thread would.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "kernels/thread_pool.h"
#include "protocol/ps.pb.h"
#include "table/cold_row_store.h"
#include "table/exact_partition.h"
#include "table/index_spares.h"
#include "table/table.h"

namespace ps::table {

class SpilledRows;

class ExactTable final : public Table {
 public:
  // The table's clock for evict_after_seconds: whole seconds, never
  // going back. Empty: a steady clock, seconds since Create.
  using SecondsClock = std::function<uint64_t()>;
  struct Options {
    SecondsClock clock;
    // Opens the disk tier (an empty store) when the spec's when_full is
    // WHEN_FULL_MOVE_TO_DISK, which needs one.
    ColdRowStoreOpener open_disk_tier;
    // Threads a large call may use, its own included (see kParallelKeys);
    // 0: one per core, at most kMaxThreads.
    int threads = 0;
    // The arrays the partitions' key indexes grow into that a thread of
    // the table makes ahead (table/index_spares.h); none: every growth
    // allocates its own.
    std::optional<IndexSpares::Sizes> index_spares = IndexSpares::kDefaultSizes;
  };
  static constexpr int kMaxThreads = 4;
  // An ApplyKeys or ReadKeys of at least this many keys of one float, or
  // as many bytes of keys and rows (8 bytes a key, 4 a float), splits its
  // partitions (applies) or chunks of keys (reads) over the table's
  // threads when no other call is using them; smaller calls, calls that
  // find them busy, and every call of a table with a disk tier (whose
  // moves are bound by the disk) run on the calling thread alone. One
  // apply thread then keeps every core busy with one worker's pushes and
  // pulls; with many apply threads the calls find the helpers busy.
  // Counted in bytes because a push's packet (256 KiB) holds ~3,600 keys
  // of 16 floats: counted in keys, every such push was applied by one
  // thread while the other cores idled.
  static constexpr size_t kParallelKeys = 8192;

  // kInvalidArgument for a spec that is not a valid EXACT table (or a
  // disk tier without a folder), kIOError when the disk tier cannot open.
  static StatusOr<std::unique_ptr<ExactTable>> Create(
      const proto::TableSpec& spec, Options options);
  static StatusOr<std::unique_ptr<ExactTable>> Create(
      const proto::TableSpec& spec);  // default Options

  // Rows on disk each newer step's (or second's) sweep reads (see above).
  static constexpr size_t kDiskSweepRows = 4096;

  RowAccess access() const override { return RowAccess::kThroughServer; }

  // Applies keys.size() gradients (values: keys.size() * dim floats) through
  // the table's optimizer, admitting and evicting as described above.
  // kInvalidArgument for a size mismatch or a non-finite value (nothing is
  // applied then).
  Status ApplyKeys(uint64_t step, std::span<const uint64_t> keys,
                   std::span<const float> values) override;
  // The same for keys that come in hash order with their hashes: each
  // partition's keys are a stretch of them, found without a pass.
  Status ApplyHashedKeys(uint64_t step, std::span<const uint64_t> keys,
                         std::span<const uint64_t> hashes,
                         std::span<const float> values) override;
  // Copies each key's row into out (keys.size() * dim floats); keys without
  // a row read as zeros and present[i] = false. Rows on disk are read from
  // there (kIOError when that fails) and brought back into memory: const
  // as a cache is, the rows' values do not change.
  Status ReadKeys(std::span<const uint64_t> keys, std::span<float> out,
                  std::span<bool> present) const override;

  bool HasRow(uint64_t key) const;
  TableCounters counters() const override;
  // The bound: capacity rows with their state, and the sketches.
  uint64_t bytes() const override;
  std::string Placement() const override;

  // Every key with its row, state and last update (ids in no order): the
  // rows in memory copied. With a disk tier: the rows on disk as
  // out->uncopied, the tier's files linked at this moment; and the rows in
  // memory written to a file on the tier's disk (out->spilled) instead of
  // copied, so that a checkpoint of a table that fills the server's memory
  // needs no memory for a copy (a failed write fails the snapshot). Where
  // the tier cannot link its files (a full disk), a view of the rows on
  // disk and the rows in memory copied, as without a tier.
  Status Snapshot(TableSnapshot* out) const override;
  // The reader fills target->exact (keys ascending).
  // With a disk tier, every row is dropped and the reader streams the
  // saved rows straight to disk (target->exact_sink).
  Status PrepareRestore(TableTarget* target) override;
  // Replaces every row with target->exact's, oldest update first.
  // kResourceExhausted when they exceed the capacity (with a disk tier: the
  // oldest go to disk instead). With a disk tier and the rows streamed
  // (target->exact empty), they stay on disk and come back into memory as
  // they are used.
  Status FinishRestore(TableTarget* target) override;

 private:
  static constexpr int kPartitionBits = ExactPartition::kPartitionBits;
  static constexpr int kPartitions = 1 << kPartitionBits;
  // Keys ReadKeys looks up under one round of shared partition locks.
  static constexpr size_t kReadChunk = 4096;

  ExactTable(const proto::TableSpec& spec, SecondsClock clock,
             std::unique_ptr<ColdRowStore> cold, int threads,
             std::optional<IndexSpares::Sizes> index_spares);
  // fn over [0, n): when there are two items or more, `keys` keys and their
  // rows are as many bytes as kParallelKeys keys of one float (or more),
  // the table has no disk tier and the helpers are free, as fn(i, i + 1)
  // for each item, the items claimed one at a time by the helpers and this
  // thread; else as fn(0, n) on this thread. Returns the failure of the
  // first item (in item order) that failed.
  Status Split(size_t n, size_t keys,
               const std::function<Status(size_t, size_t)>& fn) const;
  // ReadKeys for keys [from, to) of the pull (whole chunks but the last).
  Status ReadRange(std::span<const uint64_t> keys, std::span<float> out,
                   std::span<bool> present, size_t from, size_t to) const;
  uint32_t NowSeconds() const {
    return static_cast<uint32_t>(clock_() +
                                 clock_offset_.load(std::memory_order_relaxed));
  }

  // The push's keys grouped by partition (each group in the push's order),
  // with their hashes; what one call hands each partition.
  struct Grouped {
    std::span<const uint64_t> hashes;  // RowIndex::Mix of each key
    std::vector<uint64_t> own_hashes;  // where Group computed them
    std::vector<uint32_t> positions;   // of the keys, partition by partition
    uint32_t begin[kPartitions + 1] =
        {};  // partition p: [begin[p], begin[p+1])
  };
  static void Group(std::span<const uint64_t> keys, Grouped* out);
  // Group for keys whose hashes are given, ascending: already grouped.
  static void GroupInHashOrder(std::span<const uint64_t> hashes, Grouped* out);
  // ApplyKeys over keys grouped by partition.
  Status ApplyGrouped(uint64_t step, std::span<const uint64_t> keys,
                      std::span<const float> values, const Grouped& g);
  // kInvalidArgument (naming the table) unless `values` are keys.size() *
  // dim finite floats of fewer than 2^32 keys.
  Status CheckPush(std::span<const uint64_t> keys,
                   std::span<const float> values) const;
  static PartitionKeys Part(const Grouped& g, int p,
                            std::span<const uint64_t> keys,
                            std::span<const float> values);
  // The partition of the key whose RowIndex::Mix is `hash` (its top
  // bits), as an index and as the partition.
  static size_t PartitionIndex(uint64_t hash) {
    return hash >> (64 - kPartitionBits);
  }
  ExactPartition& Partition(uint64_t hash) const {
    return *partitions_[PartitionIndex(hash)];
  }
  ExactPartition& PartitionOf(uint64_t key) const {
    return Partition(RowIndex::Mix(key));
  }
  // Snapshot's parts (applies_mu_ held): every row in memory copied into
  // `out`, or written to a spill (keys ascending per partition).
  void CopyRowsInMemory(TableSnapshot* out) const;
  StatusOr<std::shared_ptr<const SpilledRows>> SpillRowsInMemory() const;
  // Every row freed, in memory and on disk (no apply may run).
  Status FreeAllRows();
  // Sets the clock to go on from `saved_s` (a restored checkpoint's) where
  // its own is behind, so that the seconds of rows restored as they were
  // stay in the past (a restore: no apply may run).
  void ContinueClock(uint32_t saved_s);
  // A restore's rows streamed to the disk tier (PrepareRestore).
  class StreamedRestore final : public RestoredRowSink {
   public:
    explicit StreamedRestore(ExactTable* table) : table_(table) {}
    Status Clear() override;
    Status Put(uint64_t key, const float* values, const float* const* state,
               uint64_t last_update) override;
    Status Delete(uint64_t key) override;
    void ContinueClock(uint32_t saved_s) override;
    Status Adopt(const std::string& dir) override;
    Status CountAdopted(uint64_t key) override;
    uint64_t rows() const override { return rows_; }

   private:
    ExactTable* const table_;
    std::atomic<uint64_t> rows_{0};
  };
  // A snapshot's rows on disk: the store's files linked at the cut, or,
  // where they could not be, a view of the store pinned there.
  class RowsOnDisk final : public UncopiedRows {
   public:
    RowsOnDisk(std::shared_ptr<const ColdRowFiles> files,
               std::shared_ptr<const ColdRowView> view, uint32_t dim,
               int state_arrays)
        : files_(std::move(files)),
          view_(std::move(view)),
          dim_(dim),
          state_arrays_(state_arrays) {}
    Status ForEach(const RowFn& fn) const override;
    bool linked() const override { return files_ != nullptr; }
    Status PlaceAt(const std::string& dir,
                   const std::vector<std::string>& earlier) const override;

   private:
    const std::shared_ptr<const ColdRowFiles> files_;  // or null
    const std::shared_ptr<const ColdRowView> view_;    // when files_ is null
    const uint32_t dim_;
    const int state_arrays_;
  };
  // The keys of a pull that its chunks did not find in memory (with a
  // disk tier), and their positions in the pull.
  struct ColdMisses {
    std::vector<uint32_t> at;
    std::vector<uint64_t> keys;
    void Clear() {
      at.clear();
      keys.clear();
    }
  };
  // ReadKeys's second part, for the misses of one or more chunks: read
  // from disk, then brought back.
  Status ReadMissesFromDisk(std::span<const uint64_t> keys,
                            std::span<float> out, std::span<bool> present,
                            ColdMisses* misses) const;
  // The rows a pull read from disk brought back into memory, partition by
  // partition (skipped while a snapshot or restore runs). Errors are
  // logged: the pull has its rows either way.
  void BringBack(std::vector<ExactPartition::PulledRow>* pulled) const;
  // Evicts by age in every partition once per newer step and, with
  // evict_after_seconds, once per newer second (see the header).
  void Sweep(uint64_t step, uint32_t now_s);
  // With a disk tier, the next kDiskSweepRows rows on disk: the idle ones
  // deleted. One sweeper at a time; another skips.
  void SweepDisk(uint64_t step, uint32_t now_s);
  // ExactPartition::Reclaim: frees (retires) the oldest row of the
  // partition other than `asking` whose oldest row is the oldest and older
  // than `update`.
  bool FreeOlderRow(const ExactPartition& asking, uint64_t update);

  const uint32_t dim_;
  const int state_arrays_;  // the optimizer's, per parameter
  std::atomic<uint64_t> optimizer_steps_{0};
  // Applies hold it shared, snapshots and restores exclusively.
  mutable std::shared_mutex applies_mu_;
  const SecondsClock clock_;
  // Added to clock_: a restore continues the clock of the checkpoint.
  std::atomic<uint64_t> clock_offset_{0};
  std::atomic<uint64_t> swept_step_{0};
  std::atomic<uint32_t> swept_second_{0};
  RowBudget budget_;
  const std::unique_ptr<ColdRowStore> cold_;  // null: no disk tier
  // Keys of pulls found in memory and on disk (pushes count theirs in the
  // partitions).
  mutable std::atomic<uint64_t> pull_memory_hits_{0}, pull_disk_hits_{0};
  std::mutex disk_sweep_mu_;
  uint64_t disk_sweep_from_ = 0;  // the next key to look at; disk_sweep_mu_
  std::unique_ptr<ExactPartition> partitions_[kPartitions];
  // After partitions_, so that it stops (and answers none of them) before
  // they go; null without (Options::index_spares).
  const std::unique_ptr<IndexSpares> spares_;
  // Split's helpers (null: one thread), one call at a time: the one that
  // set helpers_busy_. A flag, not a mutex: a read then holds 64
  // partition locks, as many as TSan's deadlock detector follows.
  const std::unique_ptr<kernels::ThreadPool> helpers_;
  mutable std::atomic<bool> helpers_busy_{false};
  std::unique_ptr<StreamedRestore> restore_sink_;  // the last PrepareRestore's
};

}  // namespace ps::table
