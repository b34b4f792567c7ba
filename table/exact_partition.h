// ExactPartition: one lock's worth of an ExactTable (table/exact_table.h).
// The table splits its keys over kPartitions of these by the high bits of
// RowIndex::Mix(key); each holds its keys' index, rows, optimizer state,
// free rows and admission sketch under one reader-writer lock of its own.
// Apply threads and readers of different partitions never wait for each
// other, and a partition whose index or arrays grow stops only its own
// keys.
//
// What the partitions share, the table owns and hands in: the spec, the
// per-shard memory bound (RowBudget, rows in use across all partitions),
// the optimizer step of a push, and at the bound the way to a row of
// another partition (Reclaim: a partition with few or no rows of its own
// frees the shard's least recently used row, wherever it is), and the
// disk tier, when the table has one (table/cold_row_store.h: a key is in a
// partition's memory or on disk, never both; it moves between them only
// under its partition's exclusive lock).
//
// Which row makes room at the bound is an approximate LRU, without links
// between rows: each row records when it was last used (a count of this
// partition's uses: updates, and pulls that bring it back from disk), and
// the victim is the least recently used of the next kVictimWindow rows in
// use from a hand that goes round the rows, as in CLOCK. A partition with
// at most that many rows picks its exact LRU row. Rows idle by
// evict_after_steps or evict_after_seconds are found by a sweep that goes
// round the rows too, a share of them per EvictIdle call (see there).
//
// What a row costs beside its values and state: a 16-byte RowRecord and
// 4-byte slots of its RowIndex, 70-90% full before a doubling (55-75%
// with a disk tier, whose index churns): 24 bytes a row in all at 10^8
// rows of dim 8, measured with bench/exact_growth_bench (the linked list
// and a KeyIndex's 12-byte slots this replaced took 58, and inserts were
// 30% slower).
//
// Thread safety: every method takes the partition's lock itself (shared for
// reads, exclusive for changes), except the *Locked ones, whose caller
// holds lock(): shared for FindLocked, PrefetchLocked and ForEachRowLocked,
// exclusively for the others. oldest_update() reads an atomic, no lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <shared_mutex>
#include <span>
#include <vector>

#include "base/append_row.h"
#include "base/growing_array.h"
#include "base/status.h"
#include "base/status_or.h"
#include "protocol/ps.pb.h"
#include "table/admission_sketch.h"
#include "table/cold_row_store.h"
#include "table/index_spares.h"
#include "table/initializer.h"
#include "table/optimizer_state.h"
#include "table/row_index.h"
#include "table/table_counters.h"

namespace ps::table {

// Rows in use across a table's partitions, against its bound. Lock-free.
class RowBudget {
 public:
  explicit RowBudget(uint64_t bound) : bound_(bound) {}
  // Takes one row; false (nothing taken) at the bound.
  bool Take() {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (used >= bound_) return false;
    } while (!used_.compare_exchange_weak(used, used + 1,
                                          std::memory_order_relaxed));
    return true;
  }
  // Takes n rows at once (one atomic step for a push's new keys) while
  // the shard is far from its bound: only when at least n more stay free
  // for the other partitions, so that rows one push holds and then does
  // not use (keys not admitted) make no other partition evict; near the
  // bound, rows are taken one at a time. False: nothing taken.
  bool TakeBatch(uint64_t n) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (n > bound_ / 2 || used > bound_ - 2 * n) return false;
    } while (!used_.compare_exchange_weak(used, used + n,
                                          std::memory_order_relaxed));
    return true;
  }
  // Takes one row even at the bound (a partition that cannot free one
  // without waiting): Take refuses until enough are given back.
  void Overdraw() { used_.fetch_add(1, std::memory_order_relaxed); }
  bool over() const { return used_.load(std::memory_order_relaxed) > bound_; }
  void Give(uint64_t rows = 1) {
    used_.fetch_sub(rows, std::memory_order_relaxed);
  }
  uint64_t bound() const { return bound_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // True the first time it is called: the refusal that is logged. Read
  // first: at the bound every new key asks, and a write each time took
  // the line from the other apply threads.
  bool FirstRefusal() {
    return !refused_.load(std::memory_order_relaxed) &&
           !refused_.exchange(true);
  }

 private:
  const uint64_t bound_;
  std::atomic<uint64_t> used_{0};
  // Apart from used_, which every new key and freed row writes.
  alignas(64) std::atomic<bool> refused_{false};
};

// The keys of one push that fall in one partition: positions into the
// push's keys (and its values, dim floats per key, and their RowIndex::Mix
// hashes), in the push's order.
struct PartitionKeys {
  std::span<const uint64_t> keys;
  std::span<const float> values;  // dim floats per key
  std::span<const uint32_t> positions;
  std::span<const uint64_t> hashes;  // one per key, as keys
};

class ExactPartition {
 public:
  // A table has 2^kPartitionBits partitions, picked by the top bits of
  // RowIndex::Mix(key); the index orders a partition's keys by the bits
  // below.
  static constexpr int kPartitionBits = 6;
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static_assert(kNoRow == RowIndex::kNone, "a row the index lacks is no row");
  // The rows in use that a victim search compares (see above). 16 cost
  // FM on 1M rows bound at 2,048 (32 a partition, below the working set)
  // 0.07 AUC against the exact LRU (0.6356 against 0.7067): a window of
  // half a partition's rows missed its cold half half the time. 32 gave
  // 0.7067 again, and pushes of fresh keys at the bound about 5% slower
  // (8.10 against 8.64 M keys/s, medians of 3).
  static constexpr size_t kVictimWindow = 32;
  // The fewest rows an idle sweep visits: EvictIdle's, and Apply's beyond
  // one per key.
  static constexpr size_t kMinIdleSweep = 4096;
  static constexpr size_t kMinApplySweep = 64;
  // At the bound, with when_full evicting: frees the row another partition
  // than `asking` would free next if it was updated before `update` (that
  // of the asking partition's own); true when it freed one (the row went
  // back to the budget).
  using Reclaim =
      std::function<bool(const ExactPartition& asking, uint64_t update)>;

  // `sketch_width` 0: no admission sketch (every key is admitted at its
  // first push). `growth_phase` in [0, 1) sets when this partition's
  // arrays grow: its key index at 70-90% full (55-75% with a disk tier),
  // its row arrays from room for 64-128 rows on, doubling.
  // Partitions fill at the same pace (keys spread evenly by hash), so with
  // one growth rule they would all grow in the same push, which would then
  // stall for every partition's copy; different phases spread the copies
  // over many pushes. `reclaim` may be empty (then only own rows are
  // evicted). `cold`: the table's disk tier (when_full moves rows to disk),
  // or null.
  // `spares`: where the key index asks for the array of its next growth
  // (table/index_spares.h), of the sizes that makes, once that growth is
  // kSpareLeadPercent of its slots away; null: it allocates every array
  // as it grows.
  ExactPartition(const proto::TableSpec& spec, RowBudget* budget,
                 uint64_t sketch_width, double growth_phase = 0,
                 Reclaim reclaim = {}, ColdRowStore* cold = nullptr,
                 IndexSpares* spares = nullptr);
  static constexpr uint32_t kSpareLeadPercent = 1;
  // IndexSpares's answer: the array the key index grows into next. Takes
  // the lock.
  void AdoptIndexSpare(RowIndex::Slots spare);

  // A row on disk: one record of ColdRecordBytes, laid out as its last
  // update (u64), its second of that update (u32, the table's clock), 4
  // bytes of padding, then dim values and dim floats of each state array.
  static size_t ColdRecordBytes(uint32_t dim, int state_arrays) {
    return 16 + sizeof(float) * dim * (1 + state_arrays);
  }
  struct ColdRow {
    uint64_t last_update;
    uint32_t updated_s;
    const float* values;
    const float* state[kernels::kMaxOptimizerStates];
  };
  // The fields of `record`, which must lie 4-byte aligned (a std::vector's
  // data does; RocksDB's buffers need not: copy them first).
  static ColdRow ViewColdRecord(std::span<const std::byte> record, uint32_t dim,
                                int state_arrays);

  // Applies the gradients of `in`'s keys at worker step `step` and time
  // `now_s` (the table's seconds): a key with a row is updated; a key
  // whose row is on disk has it brought back (unless it is idle by
  // evict_after_steps or evict_after_seconds: then it is deleted and the
  // key counts as new); one
  // without is counted in the sketch and gets a row once its count reaches
  // the spec's admit_after_pushes and the budget has one (at the bound: as
  // when_full says), else its gradient is dropped and counted.
  // `optimizer_step()` gives the push's optimizer step (the table takes one
  // per push, the first time a partition asks). Returns the first
  // non-OK status of the optimizer kernel or the disk tier (a key whose row
  // could not be read has its gradient dropped, counted).
  template <class StepFn>
  Status Apply(uint64_t step, uint32_t now_s, const PartitionKeys& in,
               StepFn optimizer_step);

  // The row of `key` (of this partition; `hash` is RowIndex::Mix(key)):
  // dim floats, valid while the caller holds lock(), or null without one.
  // ExactTable::ReadKeys locks every partition for a chunk of keys, so that
  // it reads them in their order without grouping them. `streams`: the
  // keys come so (Streams), and the index is probed four slots at a time
  // (RowIndex::FindInOrder).
  const float* FindLocked(uint64_t key, uint64_t hash,
                          bool streams = false) const {
    const uint32_t row = streams ? row_of_key_.FindInOrder(key, hash, keys())
                                 : row_of_key_.Find(key, hash, keys());
    return row == kNoRow ? nullptr : values_.data() + uint64_t{row} * dim_;
  }
  // A loop over many keys calls PrefetchLocked RowIndex::kPrefetchAhead
  // keys ahead and PrefetchKeyLocked kKeyAhead keys ahead of FindLocked:
  // the index slot first, then the record of the row it names.
  static constexpr size_t kKeyAhead = 8;
  // Keys in hash order at most kStreamRows rows apart on average read as
  // streams: the index's slots lie in hash order, and so, mostly, do the
  // rows of keys that arrived so (row_index.h), and the hardware fetches
  // them ahead. Fetching each key's record ahead (PrefetchKeyLocked) then
  // costs more than it saves: pulls of 10M keys in hash order ran at 37 M
  // keys/s with it, 46 without.
  static constexpr double kStreamRows = 16;
  // Whether `n` keys whose hashes ascend from `first` to `last` lie so
  // among `rows` rows spread over all hashes.
  static bool Streams(size_t n, uint64_t first, uint64_t last, uint64_t rows) {
    return n > 1 && last >= first &&
           std::ldexp(static_cast<double>(last - first), -64) *
                   static_cast<double>(rows) <=
               kStreamRows * static_cast<double>(n);
  }
  // Whether the `n` keys whose hashes are hash_at(0), ..., hash_at(n - 1)
  // ascend and lie so.
  template <class HashAt>
  static bool Streams(size_t n, HashAt hash_at, uint64_t rows) {
    if (n < 2) return false;
    for (size_t i = 1; i < n; ++i) {
      if (hash_at(i) < hash_at(i - 1)) return false;
    }
    return Streams(n, hash_at(0), hash_at(n - 1), rows);
  }
  void PrefetchLocked(uint64_t hash) const { row_of_key_.Prefetch(hash); }
  void PrefetchKeyLocked(uint64_t hash) const {
    row_of_key_.PrefetchKey(hash, keys());
  }
  // With a disk tier, a key FindLocked lacks: copies its row from disk into
  // `out` (dim floats) and returns true, or false when the disk has none.
  // Lock held, shared at least.
  StatusOr<bool> ReadColdLocked(uint64_t key, std::span<float> out) const;

  // With a disk tier, the deletes of this partition's rows on disk so far
  // (lock held, shared at least). A key's record is written to disk only
  // while the disk has none for it, so a record read from disk after this
  // count was taken is still the key's own as long as the count has not
  // moved (or moved only by BringBack's own deletes, of the keys it moves
  // in): what lets a pull read records without locks and bring them back
  // later (BringBack).
  uint64_t disk_deletes_locked() const { return disk_deletes_; }
  // Counts the store's Clear as a delete of every record (lock held).
  void CountDiskClearLocked() { ++disk_deletes_; }
  // A row a pull found on disk: its record as read, and
  // disk_deletes_locked() from before the read.
  struct PulledRow {
    uint64_t key;
    uint64_t hash;  // RowIndex::Mix(key)
    std::span<const std::byte> record;
    uint64_t disk_deletes;
  };
  // Brings the rows a pull read from disk back into memory, as a push
  // would (moving the least recently used rows out at the bound), used now
  // but with their last update unchanged; keys already back are skipped, and a
  // record that may have changed since it was read is read again. Takes
  // the lock. Stops at the first row the bound cannot take; returns the
  // disk's first error (nothing is lost: a row stays where it was).
  Status BringBack(std::span<const PulledRow> pulled);

  // Frees the rows whose last update is more than evict_after_steps (not
  // 0) before `step` or evict_after_seconds (not 0) before `now_s` among
  // the next rows of a sweep that goes round them: as many as make a round
  // in the shorter of the two periods, if it is called once a step and
  // once a second (ExactTable::Sweep), and at least kMinIdleSweep (Apply
  // sweeps on too: see there). A row idle past its period is freed within
  // one more period, and in a partition of at most kMinIdleSweep rows at
  // once.
  void EvictIdle(uint64_t step, uint32_t now_s);
  // With a disk tier: deletes the row of `key` (of this partition) from
  // disk if it lies there idle by the same measures (counted as evicted).
  Status EvictIdleOnDisk(uint64_t key, uint64_t step, uint32_t now_s);

  // The last update of the row this partition would free next (its
  // approximate LRU row; UINT64_MAX without rows), as of the end of its
  // last change: what Reclaim compares, read without the lock.
  uint64_t oldest_update() const {
    return oldest_update_.load(std::memory_order_relaxed);
  }
  // Frees the row this partition would free next (moved to disk with a
  // disk tier, else counted as evicted) if its lock is free right now and
  // it has one: a partition that holds its own lock may ask another without
  // waiting for it, so two never wait for each other.
  bool TryRetireOldest();

  bool HasRow(uint64_t key) const;
  // Rows, evictions, drops and refusals of this partition; keys waiting
  // for admission as the sketch estimates them.
  TableCounters counters() const;
  uint64_t sketch_bytes() const;
  // A row on disk that a restore adopted with the store's files
  // (ColdRowStore::Adopt): counted, nothing written.
  void CountAdoptedRowLocked() { ++counters_.rows_on_disk; }

  // For reads, snapshots and restores of the whole table, which lock every
  // partition (in order).
  std::shared_mutex& lock() const { return mu_; }
  // fn(key, values, state arrays (as float pointers), last update) per row.
  template <class Fn>
  void ForEachRowLocked(Fn fn) const;
  // Empty again: every row freed (back to the budget), the sketch cleared,
  // none counted on disk (the table clears the disk tier); counters kept.
  void FreeAllRowsLocked();
  // A row for `key` (absent) with `values`, `state` (arrays x dim floats
  // each) and `last_update` (a step), updated at `now_s` as far as
  // evict_after_seconds is concerned; false when the budget or memory has
  // none.
  bool RestoreRowLocked(uint64_t key, const float* values,
                        const float* const* state, uint64_t last_update,
                        uint32_t now_s);
  // With a disk tier: deletes the row of `key` from disk; true when it
  // was there.
  StatusOr<bool> DeleteColdRowLocked(uint64_t key);
  // The same row written straight to the disk tier (which must exist).
  Status RestoreColdRowLocked(uint64_t key, const float* values,
                              const float* const* state, uint64_t last_update,
                              uint32_t now_s);

 private:
  // What an update reads and writes of a row besides its values and
  // state, in one 16-byte record (one cache miss): its key (which the
  // index reads to tell a key from others of the same fingerprint), its
  // last update and its last use.
  struct RowRecord {
    uint64_t key;
    // The low 32 bits of its last update (a step): LastUpdate().
    uint32_t update_low;
    // kInUse | use_clock_ at its last use (Use); 0: the row is free.
    uint32_t use;
  };
  static_assert(sizeof(RowRecord) == 16 && offsetof(RowRecord, key) == 0);
  static constexpr uint32_t kInUse = uint32_t{1} << 31;
  static constexpr uint32_t kUseMask = kInUse - 1;

  // The keys of the rows, for the index.
  RowKeys keys() const {
    return {reinterpret_cast<const uint64_t*>(rows_.data()),
            sizeof(RowRecord) / sizeof(uint64_t)};
  }
  // A row's last update: newest_step_ less the row's distance below it,
  // which its low 32 bits give (an update more than 2^32 steps before the
  // newest reads as a later one).
  uint64_t LastUpdate(uint32_t row) const {
    const uint32_t behind =
        static_cast<uint32_t>(newest_step_) - rows_[row].update_low;
    return behind > newest_step_ ? 0 : newest_step_ - behind;
  }
  void SetLastUpdate(uint32_t row, uint64_t step) {
    newest_step_ = std::max(newest_step_, step);
    rows_[row].update_low = static_cast<uint32_t>(step);
  }
  // Marks `row` used now (the newest use), pinned while pinning_.
  void Use(uint32_t row);
  // Whether `row` (in use) was used since pinned_from_ while pinning_:
  // the rows an Apply has gathered and not yet applied, which no victim
  // search may take (the gradient gathered for its key would land on the
  // row's next key).
  bool Pinned(const RowRecord& r) const {
    return pinned_rows_ > 0 && ((r.use - pinned_from_) & kUseMask) <=
                                   ((use_clock_ - pinned_from_) & kUseMask);
  }
  // Starts (or, after the gathered rows were applied, starts again) and
  // ends the pinning of the rows an Apply uses.
  void PinFromNow() {
    pinned_from_ = (use_clock_ + 1) & kUseMask;
    pinned_rows_ = 0;
  }
  // The least recently used of the next kVictimWindow rows in use and not
  // pinned from hand_, or kNoRow.
  uint32_t PickVictim() const;
  // PickVictim's common case: the least recently used of the
  // kVictimWindow rows from `first` (all before the end), or kNoRow when
  // one of them is free or pinned.
  uint32_t OldestOfWholeWindow(size_t first) const;
  // Uses of the partition since the row's last one.
  uint32_t AgeOf(const RowRecord& r) const {
    return (use_clock_ - r.use) & kUseMask;
  }

  uint32_t AllocateRow(uint64_t key, uint64_t hash);  // kNoRow when none
  // Room for `rows` rows in every per-row array: when they have less, for
  // twice as many (at least first_rows_). False without memory.
  bool ReserveRows(size_t rows);
  // One row of the bound for a new key: from budget_batch_ while it lasts;
  // at the bound, when when_full says so, frees the shard's least recently
  // used row first, approximately (Reclaim, or this partition's own).
  bool TakeFromBudget();
  // Frees `row` (a victim) for another key: to disk with a disk tier
  // (counted as demoted; false, nothing freed, when the disk refuses it),
  // else counted as evicted. Its row of the bound goes back to the budget,
  // or, with kKeep, stays the caller's (for the new key that takes it).
  enum class Budget { kGive, kKeep };
  bool Retire(uint32_t row, Budget budget = Budget::kGive);
  // A key without a row in memory, with a disk tier: its row brought back
  // from disk into a row of its own (promoted), or `on_disk` false when the
  // disk has none (then the key is new, admission decides).
  struct Promotion {
    bool on_disk = false;
    uint32_t row = kNoRow;  // kNoRow on disk: no row free for it now
  };
  Status Promote(uint64_t key, uint64_t hash, uint64_t step, uint32_t now_s,
                 Promotion* out);
  // The row of `record` (read from disk for `key`) into a row of its own,
  // and off the disk: the row, or kNoRow when the bound has none (the row
  // stays on disk).
  StatusOr<uint32_t> MoveIn(uint64_t key, uint64_t hash,
                            std::span<const std::byte> record);
  // Deletes the record of `key` (on disk) and counts it: every delete from
  // disk goes through here, so disk_deletes_locked() misses none.
  Status DeleteFromDiskLocked(uint64_t key);
  // The record of a row (ColdRecordBytes) into `record`.
  void EncodeCold(uint32_t row, std::vector<std::byte>* record) const;
  void EncodeCold(const float* values, const float* const* state,
                  uint64_t last_update, uint32_t updated_s,
                  std::vector<std::byte>* record) const;
  void FreeRow(uint32_t row, Budget budget = Budget::kGive);
  // Marks `row` updated at `step` (or later, if it was) and `now_s`, and
  // used.
  void Touch(uint32_t row, uint64_t step, uint32_t now_s);
  // Frees the idle rows among the next `share` rows of the idle sweep.
  void EvictIdleLocked(uint64_t step, uint32_t now_s, size_t share);
  // EvictIdle's share (see there).
  size_t IdleSweepShare() const;
  // While the budget is over the bound (RowBudget::Overdraw): frees this
  // partition's victims (to disk, with a disk tier).
  void GiveBackOverdraftLocked();
  // A row last updated at step `last` and second `last_s` is idle at
  // `step`, `now_s` by evict_after_steps or evict_after_seconds.
  bool Idle(uint64_t last, uint32_t last_s, uint64_t step,
            uint32_t now_s) const;
  Status ApplyGathered(uint64_t optimizer_step);
  // Grows the index at once for the keys of missing_ when each will get a
  // row (RowIndex::ReserveForRange): a run of many new keys in hash order,
  // as a worker's push sends them, spans a narrow range of hashes.
  void ReserveIndexFor(const PartitionKeys& in);
  // Stores oldest_update() after a change (lock held exclusively).
  void PublishOldest();
  // After inserts: asks spares_ for the index's next array when it nears
  // a growth (RowIndex::SpareWanted) and none is asked for yet.
  void AskForIndexSpareLocked();

  const proto::TableSpec& spec_;  // the table's, which outlives us
  const uint32_t dim_;
  const uint32_t admit_;
  const RowInitializer initializer_;
  RowBudget* const budget_;
  const Reclaim reclaim_;
  const size_t first_rows_;  // room of the first growth; then doubling
  // Rows Apply took from the budget at once for its keys without rows
  // (RowBudget::TakeBatch) and has not used yet; given back at its end.
  uint64_t budget_batch_ = 0;
  ColdRowStore* const cold_;   // null: no disk tier
  IndexSpares* const spares_;  // null: none
  bool spare_asked_ = false;   // an ask of spares_ not answered yet
  std::atomic<uint64_t> oldest_update_{UINT64_MAX};

  mutable std::shared_mutex mu_;
  RowIndex row_of_key_;
  std::optional<AdmissionSketch> sketch_;
  // The per-row arrays grow in place (base/growing_array.h), all with room
  // for rows_room_ rows.
  size_t rows_room_ = 0;
  GrowingArray<float> values_;  // rows allocated * dim
  OptimizerState optimizer_;    // the rule and state arrays; steps unused
  GrowingArray<RowRecord> rows_;
  // The table's second of each row's last update; only with
  // evict_after_seconds.
  GrowingArray<uint32_t> updated_s_;
  uint64_t newest_step_ = 0;  // the latest last update of any row here
  uint32_t use_clock_ = 0;    // uses so far, mod 2^31
  size_t victim_hand_ = 0;    // where the next victim search starts
  size_t idle_hand_ = 0;      // where the next idle sweep starts
  // While pinned_rows_ > 0, the rows used from pinned_from_ on are pinned
  // (Pinned); Apply counts them as it uses them.
  uint32_t pinned_from_ = 0;
  uint64_t pinned_rows_ = 0;
  bool pinning_ = false;
  uint64_t disk_deletes_ = 0;  // see disk_deletes_locked()
  std::vector<uint32_t> free_rows_;
  TableCounters counters_;  // admission_pending unused (the sketch says)
  // Scratch of one Apply (reused, so steady pushes do not allocate).
  std::vector<uint32_t> apply_rows_;
  std::vector<uint32_t> missing_;  // positions of keys without a row
  std::vector<float> apply_grads_;
  // Records on their way to and from disk (a promotion may demote another
  // row on the way, so two).
  std::vector<std::byte> demoted_record_, promoted_record_;
};

template <class StepFn>
Status ExactPartition::Apply(uint64_t step, uint32_t now_s,
                             const PartitionKeys& in, StepFn optimizer_step) {
  std::unique_lock lock(mu_);
  // The sweep for idle rows moves on too, by as many rows as keys and
  // kMinApplySweep more: a partition whose keys come at steps that are not
  // the table's newest (ExactTable::Sweep runs once a step, the newest)
  // frees its idle rows too, and a small one all of them at once.
  EvictIdleLocked(step, now_s, in.positions.size() + kMinApplySweep);
  if (spec_.when_full() != proto::WHEN_FULL_REFUSE) GiveBackOverdraftLocked();
  apply_rows_.clear();
  apply_grads_.clear();
  missing_.clear();
  pinning_ = true;
  PinFromNow();
  auto gather = [&](uint32_t row, uint32_t at) {
    Touch(row, step, now_s);
    apply_rows_.push_back(row);
    const float* g = in.values.data() + uint64_t{at} * dim_;
    AppendRow(g, dim_, &apply_grads_);
  };
  auto flush = [&] {
    if (apply_rows_.empty()) return Status::OK();
    Status s = ApplyGathered(optimizer_.optimizer() ? optimizer_step() : 0);
    apply_rows_.clear();
    apply_grads_.clear();
    PinFromNow();  // applied: any of them may make room now
    return s;
  };
  // Keys with rows first, applied together. A push's index slots and rows
  // lie at random (its slots in order when its keys come in hash order),
  // so the slots are prefetched kPrefetchAhead keys ahead and, unless the
  // keys read as a stream (Streams), the records they name kKeyAhead keys
  // ahead: their cache misses overlap.
  const size_t n = in.positions.size();
  auto hash_at = [&](size_t i) { return in.hashes[in.positions[i]]; };
  // This partition's rows lie over 2^-kPartitionBits of the hashes.
  const bool streams = Streams(n, hash_at, counters_.rows << kPartitionBits);
  const size_t key_ahead = streams ? 0 : kKeyAhead;
  for (size_t i = 0; i < std::min(n, RowIndex::kPrefetchAhead); ++i) {
    row_of_key_.Prefetch(hash_at(i));
  }
  for (size_t i = 0; i < std::min(n, key_ahead); ++i) {
    PrefetchKeyLocked(hash_at(i));
  }
  const RowKeys keys_of_rows = keys();
  for (size_t i = 0; i < n; ++i) {
    if (i + RowIndex::kPrefetchAhead < n) {
      row_of_key_.Prefetch(hash_at(i + RowIndex::kPrefetchAhead));
    }
    if (key_ahead != 0 && i + key_ahead < n) {
      row_of_key_.PrefetchKey(hash_at(i + key_ahead), keys_of_rows);
    }
    const uint32_t at = in.positions[i];
    const uint32_t row =
        streams
            ? row_of_key_.FindInOrder(in.keys[at], in.hashes[at], keys_of_rows)
            : row_of_key_.Find(in.keys[at], in.hashes[at], keys_of_rows);
    if (row == kNoRow) {
      missing_.push_back(at);
    } else {
      gather(row, at);
    }
  }
  counters_.memory_hits += apply_rows_.size();
  Status first = flush();
  // Then the keys without: their rows brought back from disk, or
  // admission; at the bound either takes a victim's row (moved to disk or
  // freed). Victims are never rows gathered and not yet applied; when
  // every row of this partition is, those are applied first.
  auto flush_if_all_gathered = [&] {
    if (pinned_rows_ >= counters_.rows) {
      Status s = flush();
      if (first.ok()) first = s;
    }
  };
  if (!missing_.empty() && budget_->TakeBatch(missing_.size())) {
    budget_batch_ = missing_.size();
  }
  ReserveIndexFor(in);
  for (uint32_t at : missing_) {
    const uint64_t key = in.keys[at];
    const uint64_t hash = in.hashes[at];
    // Admitted (or brought back) for an earlier duplicate of the key?
    uint32_t row = row_of_key_.Find(key, hash, keys());
    bool on_disk = false;
    if (row == kNoRow && cold_ != nullptr) {
      flush_if_all_gathered();
      Promotion promoted;
      Status s = Promote(key, hash, step, now_s, &promoted);
      if (first.ok()) first = s;
      on_disk = promoted.on_disk || !s.ok();  // unread: not a new key
      row = promoted.row;
    }
    if (row == kNoRow && !on_disk) {
      const uint32_t seen = sketch_ ? sketch_->Add(hash) : 1;
      if (seen >= admit_) {
        flush_if_all_gathered();
        row = AllocateRow(key, hash);
      }
    }
    if (row == kNoRow) {  // not admitted, or no row for it
      ++counters_.dropped_pushes;
      continue;
    }
    gather(row, at);
  }
  if (budget_batch_ > 0) {
    budget_->Give(budget_batch_);
    budget_batch_ = 0;
  }
  Status s = flush();
  pinning_ = false;
  pinned_rows_ = 0;
  PublishOldest();
  AskForIndexSpareLocked();
  return first.ok() ? s : first;
}

template <class Fn>
void ExactPartition::ForEachRowLocked(Fn fn) const {
  const float* state[kernels::kMaxOptimizerStates] = {};
  for (uint32_t row = 0; row < rows_.size(); ++row) {
    if (rows_[row].use == 0) continue;  // free
    const uint64_t at = uint64_t{row} * dim_;
    for (int k = 0; k < optimizer_.arrays(); ++k) {
      state[k] = optimizer_.array(k) + at;
    }
    fn(rows_[row].key, values_.data() + at, state, LastUpdate(row));
  }
}

}  // namespace ps::table
