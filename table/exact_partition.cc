#include "table/exact_partition.h"

#include <glog/logging.h>

#include <algorithm>
#include <new>

#include "table/initializer.h"

namespace ps::table {

ExactPartition::ExactPartition(const proto::TableSpec& spec, RowBudget* budget,
                               uint64_t sketch_width, double growth_phase,
                               Reclaim reclaim)
    : spec_(spec),
      dim_(spec.dim()),
      admit_(std::max<uint32_t>(spec.admit_after_pushes(), 1)),
      budget_(budget),
      reclaim_(std::move(reclaim)),
      first_rows_(64 + static_cast<size_t>(64 * growth_phase)),
      row_of_key_(55 + static_cast<uint32_t>(20 * growth_phase)),
      optimizer_(spec) {
  if (sketch_width != 0) sketch_.emplace(sketch_width);
}

bool ExactPartition::TakeFromBudget() {
  if (budget_->Take()) return true;
  const bool evict = spec_.when_full() == proto::WHEN_FULL_EVICT_LEAST_RECENT;
  if (budget_->FirstRefusal()) {
    LOG(WARNING) << "exact table '" << spec_.name() << "' (id " << spec_.id()
                 << "): memory bound reached: all " << budget_->bound()
                 << " rows of this shard are in use; "
                 << (evict ? "from now on a new key takes the least recently "
                             "updated row of the shard (when_full)"
                           : std::string("new keys are not admitted until "
                                         "eviction frees rows") +
                                 (spec_.evict_after_steps() == 0 &&
                                          spec_.evict_after_seconds() == 0
                                      ? " (evict_after_steps and "
                                        "evict_after_seconds are 0: never)"
                                      : ""));
  }
  // The shard's least recently updated row: another partition's when it is
  // older than ours (and that partition's lock is free), else ours. A
  // partition without rows whose reclaim found none refuses; so does one
  // whose freed row another thread took first.
  if (evict) {
    const uint64_t own =
        oldest_ == kNoRow ? UINT64_MAX : meta_[oldest_].last_update;
    bool freed = reclaim_ && reclaim_(*this, own);
    if (!freed && oldest_ != kNoRow) {
      FreeRow(oldest_);
      ++counters_.evicted;
      freed = true;
    }
    if (freed && budget_->Take()) return true;
  }
  ++counters_.refused_full;
  return false;
}

bool ExactPartition::TryEvictOldest() {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || oldest_ == kNoRow) return false;
  FreeRow(oldest_);
  ++counters_.evicted;
  PublishOldest();
  return true;
}

void ExactPartition::PublishOldest() {
  oldest_update_.store(
      oldest_ == kNoRow ? UINT64_MAX : meta_[oldest_].last_update,
      std::memory_order_relaxed);
}

uint32_t ExactPartition::AllocateRow(uint64_t key, uint64_t hash) {
  if (!TakeFromBudget()) return kNoRow;
  uint32_t row;
  if (!free_rows_.empty()) {
    row = free_rows_.back();
    free_rows_.pop_back();
  } else {
    row = static_cast<uint32_t>(key_of_row_.size());
    // Without memory for one more row the table acts as full: the push is
    // dropped and counted, and every array keeps its size.
    const uint64_t floats = values_.size() + dim_;
    bool grown = row < key_of_row_.capacity() || ReserveRows(row);
    grown = grown && optimizer_.Resize(floats).ok();
    if (grown) {
      try {
        values_.resize(floats);
        key_of_row_.push_back(0);
        meta_.push_back(RowMeta{});
        if (spec_.evict_after_seconds() != 0) updated_s_.push_back(0);
      } catch (const std::bad_alloc&) {
        values_.resize(floats - dim_);
        key_of_row_.resize(row);
        meta_.resize(row);
        updated_s_.resize(std::min<size_t>(updated_s_.size(), row));
        (void)optimizer_.Resize(floats - dim_);  // shrinking: cannot fail
        grown = false;
      }
    }
    if (!grown) {
      budget_->Give();
      ++counters_.refused_full;
      return kNoRow;
    }
  }
  key_of_row_[row] = key;
  meta_[row].last_update = 0;
  float* v = values_.data() + uint64_t{row} * dim_;
  InitializeRow(spec_.initializer(), key, std::span<float>(v, dim_));
  optimizer_.ResetEntries(uint64_t{row} * dim_, dim_);
  if (!row_of_key_.Insert(key, row)) {
    LOG_FIRST_N(WARNING, 1) << "exact table '" << spec_.name()
                            << "': no memory to grow the key index; new keys "
                               "are refused as if the shard were full";
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
  const size_t room = std::max(first_rows_, 2 * rows);
  try {
    values_.reserve(room * dim_);
    key_of_row_.reserve(room);
    meta_.reserve(room);
    if (spec_.evict_after_seconds() != 0) updated_s_.reserve(room);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return optimizer_.Reserve(room * dim_).ok();
}

void ExactPartition::Unlink(uint32_t row) {
  RowMeta& m = meta_[row];
  if (m.prev != kNoRow) {
    meta_[m.prev].next = m.next;
  } else {
    oldest_ = m.next;
  }
  if (m.next != kNoRow) {
    meta_[m.next].prev = m.prev;
  } else {
    newest_ = m.prev;
  }
  m.prev = m.next = kNoRow;
}

void ExactPartition::Touch(uint32_t row, uint64_t step, uint32_t now_s) {
  RowMeta& m = meta_[row];
  m.last_update = std::max(m.last_update, step);
  if (!updated_s_.empty()) updated_s_[row] = now_s;
  if (newest_ == row) return;
  if (m.prev != kNoRow || oldest_ == row) Unlink(row);
  m.prev = newest_;
  m.next = kNoRow;
  if (newest_ != kNoRow) meta_[newest_].next = row;
  newest_ = row;
  if (oldest_ == kNoRow) oldest_ = row;
}

void ExactPartition::FreeRow(uint32_t row) {
  Unlink(row);
  row_of_key_.Erase(key_of_row_[row]);
  free_rows_.push_back(row);
  budget_->Give();
  --counters_.rows;
}

Status ExactPartition::ApplyGathered(uint64_t optimizer_step) {
  if (!optimizer_.optimizer()) {
    const float scale = optimizer_.add_scale();
    for (size_t i = 0; i < apply_rows_.size(); ++i) {
      float* row = values_.data() + uint64_t{apply_rows_[i]} * dim_;
      const float* g = apply_grads_.data() + i * dim_;
      for (uint32_t j = 0; j < dim_; ++j) row[j] += scale * g[j];
    }
    return Status::OK();
  }
  return kernels::ApplyOptimizerToRows(
      *optimizer_.optimizer(), optimizer_step,
      optimizer_.View(values_.data(), key_of_row_.size(), dim_), apply_rows_,
      apply_grads_);
}

void ExactPartition::EvictIdle(uint64_t step, uint32_t now_s) {
  std::unique_lock lock(mu_);
  EvictIdleLocked(step, now_s);
}

bool ExactPartition::IdleLocked(uint32_t row, uint64_t step,
                                uint32_t now_s) const {
  const uint64_t steps = spec_.evict_after_steps();
  const uint64_t seconds = spec_.evict_after_seconds();
  const uint64_t last = meta_[row].last_update;
  return (steps != 0 && step > last && step - last > steps) ||
         (seconds != 0 && now_s > updated_s_[row] &&
          now_s - updated_s_[row] > seconds);
}

void ExactPartition::EvictIdleLocked(uint64_t step, uint32_t now_s) {
  if (spec_.evict_after_steps() == 0 && spec_.evict_after_seconds() == 0) {
    return;
  }
  // Oldest first, up to the first row young enough by both measures: the
  // list is in update order, which is the order of the seconds and, as a
  // job's steps rise with time, nearly that of the steps.
  while (oldest_ != kNoRow && IdleLocked(oldest_, step, now_s)) {
    FreeRow(oldest_);
    ++counters_.evicted;
  }
  PublishOldest();
}

bool ExactPartition::HasRow(uint64_t key) const {
  std::shared_lock lock(mu_);
  return row_of_key_.Find(key) != KeyIndex::kNone;
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
  while (oldest_ != kNoRow) FreeRow(oldest_);
  PublishOldest();
  if (sketch_) sketch_.emplace(sketch_->width());
}

bool ExactPartition::RestoreRowLocked(uint64_t key, const float* values,
                                      const float* const* state,
                                      uint64_t last_update, uint32_t now_s) {
  const uint32_t row = AllocateRow(key, KeyIndex::Mix(key));
  if (row == kNoRow) return false;
  const uint64_t at = uint64_t{row} * dim_;
  std::copy_n(values, dim_, values_.data() + at);
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    std::copy_n(state[k], dim_, optimizer_.array(k) + at);
  }
  Touch(row, last_update, now_s);
  PublishOldest();
  return true;
}

}  // namespace ps::table
