#include "table/exact_partition.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "kernels/sparse_accumulate.h"

namespace ps::table {

ExactPartition::ExactPartition(const proto::TableSpec& spec, RowBudget* budget,
                               uint64_t sketch_width, double growth_phase,
                               Reclaim reclaim, ColdRowStore* cold,
                               IndexSpares* spares)
    : spec_(spec),
      dim_(spec.dim()),
      admit_(std::max<uint32_t>(spec.admit_after_pushes(), 1)),
      initializer_(spec.initializer()),
      budget_(budget),
      reclaim_(std::move(reclaim)),
      first_rows_(64 + static_cast<size_t>(64 * growth_phase)),
      cold_(cold),
      spares_(spares),
      // A disk tier's index churns (each miss erases a key and files
      // another) and its lookups of keys on disk probe to a run's end: at
      // 70-90% full its training steps were 8% slower than at 55-75%.
      row_of_key_((cold != nullptr ? 55 : 70) +
                      static_cast<uint32_t>(20 * growth_phase),
                  kPartitionBits),
      optimizer_(spec) {
  if (sketch_width != 0) sketch_.emplace(sketch_width);
}

void ExactPartition::ReserveIndexFor(const PartitionKeys& in) {
  // A few new keys grow the index as they are inserted; reserving for them
  // would cost a pass for nothing. Where admission waits for a key's later
  // pushes, most new keys get no row (nor a slot) now: no room for them.
  constexpr size_t kManyKeys = 64;
  if (missing_.size() < kManyKeys || admit_ > 1) return;
  uint64_t low = UINT64_MAX, high = 0;
  for (uint32_t at : missing_) {
    low = std::min(low, in.hashes[at]);
    high = std::max(high, in.hashes[at]);
  }
  // At most four times this partition's share of the bound: keys whose
  // hashes crowd one narrow range (crafted ones) may slow their own
  // inserts, but not make the index take that much more memory.
  const uint64_t share = budget_->bound() >> (kPartitionBits - 2);
  (void)row_of_key_.ReserveForRange(
      missing_.size(), low, high,
      static_cast<size_t>(std::max<uint64_t>(share, missing_.size())), keys());
}

bool ExactPartition::TakeFromBudget() {
  if (budget_batch_ > 0) {
    --budget_batch_;
    return true;
  }
  if (budget_->Take()) return true;
  const bool evict = spec_.when_full() != proto::WHEN_FULL_REFUSE;
  if (budget_->FirstRefusal()) {
    LOG(WARNING) << "exact table '" << spec_.name() << "' (id " << spec_.id()
                 << "): memory bound reached: all " << budget_->bound()
                 << " rows of this shard are in use; "
                 << (cold_ != nullptr
                         ? "from now on the least recently used rows of "
                           "the shard move to disk (" +
                               cold_->where() + ") to make room (when_full)"
                     : evict ? "from now on a new key takes the least "
                               "recently used row of the shard, "
                               "approximately (when_full)"
                             : std::string("new keys are not admitted until "
                                           "eviction frees rows") +
                                   (spec_.evict_after_steps() == 0 &&
                                            spec_.evict_after_seconds() == 0
                                        ? " (evict_after_steps and "
                                          "evict_after_seconds are 0: never)"
                                        : ""));
  }
  // The shard's least recently used row, approximately: another
  // partition's victim when it was updated before ours (and that
  // partition's lock is free), else ours. A refusal would drop the new
  // key's gradient (and, with a disk tier, that of a key whose row is on
  // disk), so it frees rows until it gets one (another thread may take a
  // freed row first); when none can be freed without waiting (its own rows
  // all pinned or gone to other partitions, and every partition with rows
  // busy: waiting here, lock held, could wait for a thread that waits for
  // us), it takes one beyond the bound, which the next rows taken give
  // back (the budget is over, so each frees rows until it is under, and
  // every Apply begins by freeing its own rows while it is over). Only the
  // disk refusing rows refuses then. (Refusing instead dropped the
  // gradients of 0.1% of the keys of 10M-key pushes at the bound, where
  // the table's threads keep most partitions busy.)
  //
  // Own rows that wait in an Apply's gather are pinned, never victims: the
  // gradient gathered for one would land on the new key's row (and miss
  // its old key's). Apply applies them first when every row waits.
  //
  // Our own victim's row of the bound passes straight to the new key (no
  // give and take of the shared count, which another thread could take
  // in between).
  while (evict) {
    const uint32_t victim = PickVictim();
    const uint64_t own = victim != kNoRow ? LastUpdate(victim) : UINT64_MAX;
    if (reclaim_ && reclaim_(*this, own)) {
      if (budget_->Take()) return true;
      continue;
    }
    if (victim == kNoRow) {
      budget_->Overdraw();
      return true;
    }
    if (Retire(victim, Budget::kKeep)) return true;
    break;  // the disk refuses rows (logged)
  }
  ++counters_.refused_full;
  return false;
}

bool ExactPartition::TryRetireOldest() {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  const uint32_t victim = PickVictim();
  if (victim == kNoRow || !Retire(victim)) return false;
  PublishOldest();
  return true;
}

uint32_t ExactPartition::OldestOfWholeWindow(size_t first) const {
  // Without a branch a row: the common case at the bound.
  const RowRecord* r = rows_.data() + first;
  bool all_candidates = true;
  uint32_t best = static_cast<uint32_t>(first), best_age = AgeOf(r[0]);
  for (size_t j = 0; j < kVictimWindow; ++j) {
    all_candidates &= (r[j].use != 0) & !Pinned(r[j]);
    const uint32_t age = AgeOf(r[j]);
    const bool older = age > best_age;
    best = older ? static_cast<uint32_t>(first + j) : best;
    best_age = older ? age : best_age;
  }
  return all_candidates ? best : kNoRow;
}

uint32_t ExactPartition::PickVictim() const {
  const size_t n = rows_.size();
  size_t i = victim_hand_ < n ? victim_hand_ : 0;
  if (i + kVictimWindow <= n) {
    const uint32_t oldest = OldestOfWholeWindow(i);
    if (oldest != kNoRow) return oldest;
  }
  // At most one round: free and pinned rows are passed over.
  uint32_t best = kNoRow, best_age = 0;
  size_t compared = 0;
  for (size_t visited = 0; visited < n && compared < kVictimWindow;
       ++visited, i = i + 1 == n ? 0 : i + 1) {
    const RowRecord& r = rows_[i];
    if (r.use == 0 || Pinned(r)) continue;
    ++compared;
    const uint32_t age = AgeOf(r);
    if (best == kNoRow || age > best_age) {
      best = static_cast<uint32_t>(i);
      best_age = age;
    }
  }
  return best;
}

void ExactPartition::Use(uint32_t row) {
  RowRecord& r = rows_[row];
  if (pinning_ && !(r.use != 0 && Pinned(r))) ++pinned_rows_;
  use_clock_ = (use_clock_ + 1) & kUseMask;
  r.use = kInUse | use_clock_;
}

bool ExactPartition::Retire(uint32_t row, Budget budget) {
  if (cold_ == nullptr) {
    victim_hand_ = row + 1;
    FreeRow(row, budget);
    ++counters_.evicted;
    return true;
  }
  EncodeCold(row, &demoted_record_);
  const Status s = cold_->Put(rows_[row].key, demoted_record_);
  if (!s.ok()) {
    // The row stays; the new key waits (refused, counted) until the disk
    // takes rows again. Nothing is lost.
    LOG_EVERY_N(ERROR, 10000) << "exact table '" << spec_.name()
                              << "': cannot move a row to disk, so new keys "
                                 "are refused as if the shard were full: "
                              << s;
    return false;
  }
  victim_hand_ = row + 1;
  FreeRow(row, budget);
  ++counters_.demoted;
  ++counters_.rows_on_disk;
  return true;
}

ExactPartition::ColdRow ExactPartition::ViewColdRecord(
    std::span<const std::byte> record, uint32_t dim, int state_arrays) {
  ColdRow r{};
  std::memcpy(&r.last_update, record.data(), sizeof(r.last_update));
  std::memcpy(&r.updated_s, record.data() + 8, sizeof(r.updated_s));
  const float* floats = reinterpret_cast<const float*>(record.data() + 16);
  r.values = floats;
  for (int k = 0; k < state_arrays; ++k) {
    r.state[k] = floats + uint64_t{dim} * (1 + k);
  }
  return r;
}

void ExactPartition::EncodeCold(uint32_t row,
                                std::vector<std::byte>* record) const {
  const float* state[kernels::kMaxOptimizerStates] = {};
  const uint64_t at = uint64_t{row} * dim_;
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    state[k] = optimizer_.array(k) + at;
  }
  EncodeCold(values_.data() + at, state, LastUpdate(row),
             updated_s_.empty() ? 0 : updated_s_[row], record);
}

void ExactPartition::EncodeCold(const float* values, const float* const* state,
                                uint64_t last_update, uint32_t updated_s,
                                std::vector<std::byte>* record) const {
  record->assign(ColdRecordBytes(dim_, optimizer_.arrays()), std::byte{0});
  std::byte* out = record->data();
  std::memcpy(out, &last_update, sizeof(last_update));
  std::memcpy(out + 8, &updated_s, sizeof(updated_s));
  const size_t row_bytes = sizeof(float) * dim_;
  std::memcpy(out + 16, values, row_bytes);
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    std::memcpy(out + 16 + row_bytes * (1 + k), state[k], row_bytes);
  }
}

Status ExactPartition::Promote(uint64_t key, uint64_t hash, uint64_t step,
                               uint32_t now_s, Promotion* out) {
  *out = Promotion{};
  promoted_record_.resize(cold_->record_bytes());
  auto found = cold_->Get(key, promoted_record_);
  if (!found.ok()) {
    return found.status().WithContext("exact table '" + spec_.name() + "'");
  }
  if (!*found) return Status::OK();
  ++counters_.disk_hits;
  const ColdRow cold =
      ViewColdRecord(promoted_record_, dim_, optimizer_.arrays());
  if (Idle(cold.last_update, cold.updated_s, step, now_s)) {
    // Evicted by age where it lies, as a row in memory would have been.
    PS_RETURN_IF_ERROR(DeleteFromDiskLocked(key));
    ++counters_.evicted;
    return Status::OK();
  }
  out->on_disk = true;
  PS_ASSIGN_OR_RETURN(out->row, MoveIn(key, hash, promoted_record_));
  return Status::OK();
}

StatusOr<uint32_t> ExactPartition::MoveIn(uint64_t key, uint64_t hash,
                                          std::span<const std::byte> record) {
  const uint32_t row = AllocateRow(key, hash);  // may move another to disk
  if (row == kNoRow) return kNoRow;
  const ColdRow cold = ViewColdRecord(record, dim_, optimizer_.arrays());
  const uint64_t at = uint64_t{row} * dim_;
  std::copy_n(cold.values, dim_, values_.data() + at);
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    std::copy_n(cold.state[k], dim_, optimizer_.array(k) + at);
  }
  SetLastUpdate(row, cold.last_update);
  if (!updated_s_.empty()) updated_s_[row] = cold.updated_s;
  const Status deleted = DeleteFromDiskLocked(key);
  if (!deleted.ok()) {
    // The row stays on disk, where the next push or pull finds it again.
    FreeRow(row);
    return deleted.WithContext("exact table '" + spec_.name() + "'");
  }
  ++counters_.promoted;
  return row;
}

Status ExactPartition::DeleteFromDiskLocked(uint64_t key) {
  PS_RETURN_IF_ERROR(cold_->Delete(key));
  ++disk_deletes_;
  --counters_.rows_on_disk;
  return Status::OK();
}

Status ExactPartition::BringBack(std::span<const PulledRow> pulled) {
  std::unique_lock lock(mu_);
  // Taken once: the deletes this loop makes are of the keys it moves in,
  // which leave every other pulled record as it was read (the rows it
  // moves out are rows in memory, whose keys have no record on disk, and
  // the rows it takes from other partitions are theirs). A key pulled
  // twice is found in memory the second time, or, moved out again
  // meanwhile, lies on disk as the same row. Comparing against the
  // running count instead read nearly every record again, one disk read
  // at a time.
  const uint64_t deletes_before = disk_deletes_;
  Status first;
  for (const PulledRow& p : pulled) {
    if (row_of_key_.Find(p.key, p.hash, keys()) != kNoRow) continue;
    std::span<const std::byte> record = p.record;
    if (deletes_before != p.disk_deletes) {
      promoted_record_.resize(cold_->record_bytes());
      auto found = cold_->Get(p.key, promoted_record_);
      if (!found.ok()) {
        first =
            found.status().WithContext("exact table '" + spec_.name() + "'");
        break;
      }
      if (!*found) continue;  // evicted meanwhile
      record = promoted_record_;
    }
    auto row = MoveIn(p.key, p.hash, record);
    if (!row.ok()) {
      first = row.status();
      break;
    }
    if (*row == kNoRow) break;
    Use(*row);  // used, but not updated: its last update stays
  }
  PublishOldest();
  AskForIndexSpareLocked();
  return first;
}

void ExactPartition::AskForIndexSpareLocked() {
  if (spares_ == nullptr || spare_asked_) return;
  const size_t slots = row_of_key_.SpareWanted(kSpareLeadPercent);
  if (slots == 0 || !spares_->Makes(slots)) return;
  spare_asked_ = true;
  spares_->Ask(slots, [this](RowIndex::Slots spare) {
    AdoptIndexSpare(std::move(spare));
  });
}

void ExactPartition::AdoptIndexSpare(RowIndex::Slots spare) {
  std::unique_lock lock(mu_);
  row_of_key_.AdoptSpare(std::move(spare));
  spare_asked_ = false;
}

Status ExactPartition::EvictIdleOnDisk(uint64_t key, uint64_t step,
                                       uint32_t now_s) {
  std::unique_lock lock(mu_);
  // Read again under the lock: the row may have come back and gone out
  // again since the caller saw it.
  promoted_record_.resize(cold_->record_bytes());
  PS_ASSIGN_OR_RETURN(const bool found, cold_->Get(key, promoted_record_));
  if (!found) return Status::OK();
  const ColdRow cold =
      ViewColdRecord(promoted_record_, dim_, optimizer_.arrays());
  if (!Idle(cold.last_update, cold.updated_s, step, now_s)) {
    return Status::OK();
  }
  PS_RETURN_IF_ERROR(DeleteFromDiskLocked(key));
  ++counters_.evicted;
  return Status::OK();
}

StatusOr<bool> ExactPartition::ReadColdLocked(uint64_t key,
                                              std::span<float> out) const {
  std::vector<std::byte> record(cold_->record_bytes());
  PS_ASSIGN_OR_RETURN(const bool found, cold_->Get(key, record));
  if (found) {
    std::memcpy(out.data(), record.data() + 16, sizeof(float) * dim_);
  }
  return found;
}

void ExactPartition::PublishOldest() {
  const uint32_t victim = PickVictim();
  oldest_update_.store(victim == kNoRow ? UINT64_MAX : LastUpdate(victim),
                       std::memory_order_relaxed);
}

uint32_t ExactPartition::AllocateRow(uint64_t key, uint64_t hash) {
  if (!TakeFromBudget()) return kNoRow;
  uint32_t row;
  if (!free_rows_.empty()) {
    row = free_rows_.back();
    free_rows_.pop_back();
  } else {
    row = static_cast<uint32_t>(rows_.size());
    // Without memory for one more row the table acts as full: the push is
    // dropped and counted, and every array keeps its size.
    if (!ReserveRows(size_t{row} + 1)) {
      budget_->Give();
      ++counters_.refused_full;
      return kNoRow;
    }
    // Every array has room for the row: none of these can fail.
    (void)values_.Resize(values_.size() + dim_);
    (void)optimizer_.Resize(values_.size());
    (void)rows_.Resize(size_t{row} + 1);
    if (spec_.evict_after_seconds() != 0) {
      (void)updated_s_.Resize(size_t{row} + 1);
    }
  }
  // Its last update the oldest one the record can say, until the caller
  // sets it (Touch keeps the later of the two).
  rows_[row].key = key;
  rows_[row].update_low = static_cast<uint32_t>(newest_step_) + 1;
  Use(row);
  float* v = values_.data() + uint64_t{row} * dim_;
  initializer_.Fill(key, std::span<float>(v, dim_));
  optimizer_.ResetEntries(uint64_t{row} * dim_, dim_);
  if (!row_of_key_.Insert(hash, row, keys())) {
    LOG_FIRST_N(WARNING, 1)
        << "exact table '" << spec_.name()
        << "': no memory to grow the key index (or " << RowIndex::kMaxRows
        << " rows in one of its 64 partitions); new keys "
           "are refused as if the shard were full";
    if (pinning_) --pinned_rows_;
    rows_[row].use = 0;
    free_rows_.push_back(row);
    budget_->Give();
    ++counters_.refused_full;
    return kNoRow;
  }
  if (sketch_) sketch_->Forget(hash);  // admitted: no longer waits
  ++counters_.rows;
  return row;
}

bool ExactPartition::ReserveRows(size_t rows) {
  if (rows <= rows_room_) return true;
  const size_t room = std::max(first_rows_, 2 * rows);
  const bool reserved =
      values_.Reserve(room * dim_) && rows_.Reserve(room) &&
      (spec_.evict_after_seconds() == 0 || updated_s_.Reserve(room)) &&
      optimizer_.Reserve(room * dim_).ok();
  if (reserved) rows_room_ = room;
  return reserved;
}

void ExactPartition::Touch(uint32_t row, uint64_t step, uint32_t now_s) {
  SetLastUpdate(row, std::max(LastUpdate(row), step));
  if (!updated_s_.empty()) updated_s_[row] = now_s;
  Use(row);
}

void ExactPartition::FreeRow(uint32_t row, Budget budget) {
  // Erased while the record still holds its key: the index reads it.
  const uint64_t key = rows_[row].key;
  row_of_key_.Erase(key, RowIndex::Mix(key), keys());
  rows_[row].use = 0;
  free_rows_.push_back(row);
  if (budget == Budget::kGive) budget_->Give();
  --counters_.rows;
}

Status ExactPartition::ApplyGathered(uint64_t optimizer_step) {
  if (!optimizer_.optimizer()) {
    // The adds of a HASHED table (ParamTable::Apply): the kernel prefetches
    // the scattered rows ahead. The gradients are this Apply's scratch.
    const float scale = optimizer_.add_scale();
    if (scale != 1.0f) {
      for (float& g : apply_grads_) g *= scale;
    }
    return kernels::AccumulateRows(apply_rows_, apply_grads_,
                                   {values_.data(), rows_.size(), dim_},
                                   kernels::AccumulateMode::kExclusive);
  }
  return kernels::ApplyOptimizerToRows(
      *optimizer_.optimizer(), optimizer_step,
      optimizer_.View(values_.data(), rows_.size(), dim_), apply_rows_,
      apply_grads_);
}

void ExactPartition::EvictIdle(uint64_t step, uint32_t now_s) {
  std::unique_lock lock(mu_);
  EvictIdleLocked(step, now_s, IdleSweepShare());
}

void ExactPartition::GiveBackOverdraftLocked() {
  uint32_t victim;
  while (budget_->over() && (victim = PickVictim()) != kNoRow &&
         Retire(victim)) {
  }
}

bool ExactPartition::Idle(uint64_t last, uint32_t last_s, uint64_t step,
                          uint32_t now_s) const {
  const uint64_t steps = spec_.evict_after_steps();
  const uint64_t seconds = spec_.evict_after_seconds();
  return (steps != 0 && step > last && step - last > steps) ||
         (seconds != 0 && now_s > last_s && now_s - last_s > seconds);
}

size_t ExactPartition::IdleSweepShare() const {
  // A round in the shorter period: ExactTable::Sweep calls once a step and
  // once a second.
  const uint64_t steps = spec_.evict_after_steps();
  const uint64_t seconds = spec_.evict_after_seconds();
  const uint64_t period =
      std::max<uint64_t>(1, std::min(steps == 0 ? UINT64_MAX : steps,
                                     seconds == 0 ? UINT64_MAX : seconds));
  return std::max<uint64_t>(kMinIdleSweep,
                            (rows_.size() + period - 1) / period);
}

void ExactPartition::EvictIdleLocked(uint64_t step, uint32_t now_s,
                                     size_t share) {
  const size_t n = rows_.size();
  if ((spec_.evict_after_steps() == 0 && spec_.evict_after_seconds() == 0) ||
      n == 0) {
    return;
  }
  share = std::min(share, n);
  size_t i = idle_hand_ < n ? idle_hand_ : 0;
  for (size_t visited = 0; visited < share;
       ++visited, i = i + 1 == n ? 0 : i + 1) {
    if (rows_[i].use == 0) continue;
    const uint32_t row = static_cast<uint32_t>(i);
    if (Idle(LastUpdate(row), updated_s_.empty() ? 0 : updated_s_[row], step,
             now_s)) {
      FreeRow(row);
      ++counters_.evicted;
    }
  }
  idle_hand_ = i;
  PublishOldest();
}

bool ExactPartition::HasRow(uint64_t key) const {
  std::shared_lock lock(mu_);
  return row_of_key_.Find(key, RowIndex::Mix(key), keys()) != kNoRow;
}

TableCounters ExactPartition::counters() const {
  std::shared_lock lock(mu_);
  TableCounters c = counters_;
  c.admission_pending = sketch_ ? sketch_->EstimatedKeys() : 0;
  return c;
}

uint64_t ExactPartition::sketch_bytes() const {
  return sketch_ ? sketch_->bytes() : 0;
}

void ExactPartition::FreeAllRowsLocked() {
  for (uint32_t row = 0; row < rows_.size(); ++row) {
    if (rows_[row].use != 0) FreeRow(row);
  }
  counters_.rows_on_disk = 0;
  ++disk_deletes_;  // the table clears the disk next
  PublishOldest();
  if (sketch_) sketch_.emplace(sketch_->width());
}

bool ExactPartition::RestoreRowLocked(uint64_t key, const float* values,
                                      const float* const* state,
                                      uint64_t last_update, uint32_t now_s) {
  const uint32_t row = AllocateRow(key, RowIndex::Mix(key));
  if (row == kNoRow) return false;
  const uint64_t at = uint64_t{row} * dim_;
  std::copy_n(values, dim_, values_.data() + at);
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    std::copy_n(state[k], dim_, optimizer_.array(k) + at);
  }
  SetLastUpdate(row, last_update);
  if (!updated_s_.empty()) updated_s_[row] = now_s;
  Use(row);
  PublishOldest();
  return true;
}

StatusOr<bool> ExactPartition::DeleteColdRowLocked(uint64_t key) {
  promoted_record_.resize(cold_->record_bytes());
  PS_ASSIGN_OR_RETURN(const bool found, cold_->Get(key, promoted_record_));
  if (!found) return false;
  PS_RETURN_IF_ERROR(DeleteFromDiskLocked(key));
  return true;
}

Status ExactPartition::RestoreColdRowLocked(uint64_t key, const float* values,
                                            const float* const* state,
                                            uint64_t last_update,
                                            uint32_t now_s) {
  EncodeCold(values, state, last_update, now_s, &demoted_record_);
  PS_RETURN_IF_ERROR(cold_->Put(key, demoted_record_));
  ++counters_.rows_on_disk;
  return Status::OK();
}

}  // namespace ps::table
