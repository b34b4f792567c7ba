#include "table/exact_table.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "protocol/table_config.h"
#include "table/initializer.h"

namespace ps::table {
namespace {

std::string Where(const proto::TableSpec& spec) {
  return "exact table '" + spec.name() + "' (id " + std::to_string(spec.id()) +
         ")";
}

}  // namespace

StatusOr<std::unique_ptr<ExactTable>> ExactTable::Create(
    const proto::TableSpec& spec) {
  if (spec.kind() != proto::EXACT) {
    return InvalidArgument("table '" + spec.name() + "' is not an EXACT table");
  }
  PS_RETURN_IF_ERROR(protocol::ValidateTableSpec(spec));
  PS_RETURN_IF_ERROR(ValidateInitializer(spec.initializer()));
  if (spec.capacity() >= kNoRow) {
    return InvalidArgument(Where(spec) + ": capacity " +
                           std::to_string(spec.capacity()) +
                           " rows per shard exceeds 2^32 - 1");
  }
  return std::unique_ptr<ExactTable>(new ExactTable(spec));
}

ExactTable::ExactTable(const proto::TableSpec& spec)
    : Table(spec),
      dim_(spec.dim()),
      capacity_(spec.capacity()),
      max_pending_(std::max<size_t>(4 * spec.capacity(), 1 << 16)),
      optimizer_(spec) {}

uint32_t ExactTable::AllocateRow(uint64_t key) {
  uint32_t row;
  if (!free_rows_.empty()) {
    row = free_rows_.back();
    free_rows_.pop_back();
  } else if (key_of_row_.size() < capacity_) {
    row = static_cast<uint32_t>(key_of_row_.size());
    // Without memory for one more row the table acts as full: the push is
    // dropped and counted, and every array keeps its size.
    const uint64_t floats = values_.size() + dim_;
    if (!optimizer_.Resize(floats).ok()) return kNoRow;
    try {
      values_.resize(floats);
      key_of_row_.push_back(0);
      last_update_.push_back(0);
      prev_.push_back(kNoRow);
      next_.push_back(kNoRow);
    } catch (const std::bad_alloc&) {
      values_.resize(floats - dim_);
      key_of_row_.resize(row);
      last_update_.resize(row);
      prev_.resize(row);
      next_.resize(row);
      (void)optimizer_.Resize(floats - dim_);  // shrinking: cannot fail
      return kNoRow;
    }
  } else {
    return kNoRow;
  }
  key_of_row_[row] = key;
  float* v = values_.data() + uint64_t{row} * dim_;
  InitializeRow(spec().initializer(), key, std::span<float>(v, dim_));
  optimizer_.ResetEntries(uint64_t{row} * dim_, dim_);
  if (!row_of_key_.Insert(key, row)) {
    LOG_FIRST_N(WARNING, 1) << Where(spec())
                            << ": no memory to grow the key index; new keys "
                               "are refused as if the shard were full";
    free_rows_.push_back(row);
    return kNoRow;
  }
  ++counters_.rows;
  return row;
}

void ExactTable::Unlink(uint32_t row) {
  uint32_t p = prev_[row], n = next_[row];
  if (p != kNoRow)
    next_[p] = n;
  else
    oldest_ = n;
  if (n != kNoRow)
    prev_[n] = p;
  else
    newest_ = p;
  prev_[row] = next_[row] = kNoRow;
}

void ExactTable::Touch(uint32_t row, uint64_t step) {
  last_update_[row] = std::max(last_update_[row], step);
  if (newest_ == row) return;
  if (prev_[row] != kNoRow || oldest_ == row) Unlink(row);
  prev_[row] = newest_;
  next_[row] = kNoRow;
  if (newest_ != kNoRow) next_[newest_] = row;
  newest_ = row;
  if (oldest_ == kNoRow) oldest_ = row;
}

void ExactTable::FreeRow(uint32_t row) {
  Unlink(row);
  row_of_key_.Erase(key_of_row_[row]);
  free_rows_.push_back(row);
  --counters_.rows;
}

void ExactTable::FreeAllRows() {
  while (oldest_ != kNoRow) FreeRow(oldest_);
  pending_.clear();
  optimizer_.set_steps(0);
}

void ExactTable::EvictOlderThan(uint64_t step) {
  const uint64_t age = spec().evict_after_steps();
  if (age == 0) return;
  while (oldest_ != kNoRow && step > last_update_[oldest_] &&
         step - last_update_[oldest_] > age) {
    FreeRow(oldest_);
    ++counters_.evicted;
  }
}

Status ExactTable::ApplyKeys(uint64_t step, std::span<const uint64_t> keys,
                             std::span<const float> values) {
  if (values.size() != keys.size() * dim_) {
    return InvalidArgument(Where(spec()) + ": " + std::to_string(keys.size()) +
                           " keys of dim " + std::to_string(dim_) + " need " +
                           std::to_string(keys.size() * dim_) +
                           " values, got " + std::to_string(values.size()));
  }
  for (float v : values) {
    if (!std::isfinite(v)) {
      return InvalidArgument(Where(spec()) +
                             ": push carries a non-finite value");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  EvictOlderThan(step);
  apply_rows_.clear();
  apply_grads_.clear();
  const uint32_t admit = std::max<uint32_t>(spec().admit_after_pushes(), 1);
  for (size_t i = 0; i < keys.size(); ++i) {
    row_of_key_.PrefetchFor(keys, i);
    const uint64_t key = keys[i];
    uint32_t row = kNoRow;
    if (const uint32_t found = row_of_key_.Find(key);
        found != KeyIndex::kNone) {
      row = found;
    } else {
      auto p = pending_.find(key);
      uint32_t seen = (p == pending_.end() ? 0 : p->second) + 1;
      if (seen >= admit) {
        row = AllocateRow(key);
        if (row == kNoRow) {
          ++counters_.refused_full;
          if (!logged_full_) {
            logged_full_ = true;
            LOG(WARNING) << Where(spec()) << ": memory bound reached: all "
                         << capacity_
                         << " rows of this shard are in use; new keys are "
                            "not admitted until eviction frees rows"
                         << (spec().evict_after_steps() == 0
                                 ? " (evict_after_steps is 0: never)"
                                 : "");
          }
        } else if (p != pending_.end()) {
          pending_.erase(p);
        }
      }
      if (row == kNoRow) {
        ++counters_.dropped_pushes;
        if (p != pending_.end()) {
          p->second = seen;
        } else if (pending_.size() < max_pending_) {
          pending_.emplace(key, seen);
        } else if (!logged_pending_full_) {
          logged_pending_full_ = true;
          LOG(WARNING) << Where(spec()) << ": " << pending_.size()
                       << " keys wait for admission (the bound); pushes of "
                          "further new keys are not counted";
        }
        continue;
      }
    }
    Touch(row, step);
    apply_rows_.push_back(row);
    apply_grads_.insert(apply_grads_.end(), values.begin() + i * dim_,
                        values.begin() + (i + 1) * dim_);
  }
  counters_.admission_pending = pending_.size();
  if (apply_rows_.empty()) return Status::OK();
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
      *optimizer_.optimizer(), optimizer_.NextStep(),
      optimizer_.View(values_.data(), key_of_row_.size(), dim_), apply_rows_,
      apply_grads_);
}

Status ExactTable::ReadKeys(std::span<const uint64_t> keys,
                            std::span<float> out,
                            std::span<bool> present) const {
  if (out.size() != keys.size() * dim_ || present.size() != keys.size()) {
    return InvalidArgument(Where(spec()) + ": pull of " +
                           std::to_string(keys.size()) +
                           " keys given buffers of the wrong size");
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    row_of_key_.PrefetchFor(keys, i);
    float* dst = out.data() + i * dim_;
    const uint32_t row = row_of_key_.Find(keys[i]);
    present[i] = row != KeyIndex::kNone;
    if (present[i]) {
      std::copy_n(values_.data() + uint64_t{row} * dim_, dim_, dst);
    } else {
      std::fill_n(dst, dim_, 0.0f);
    }
  }
  return Status::OK();
}

bool ExactTable::HasRow(uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return row_of_key_.Find(key) != KeyIndex::kNone;
}

TableCounters ExactTable::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

uint64_t ExactTable::bytes() const {
  return capacity_ * dim_ * sizeof(float) * (1 + optimizer_.arrays());
}

std::string ExactTable::Placement() const {
  return "at most " + Table::Placement();
}

Status ExactTable::Snapshot(TableSnapshot* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int arrays = optimizer_.arrays();
  out->ids.clear();
  out->values.clear();
  for (auto& state : out->state) state.clear();
  out->last_update.clear();
  out->state_arrays = arrays;
  out->optimizer_steps = optimizer_.steps();
  row_of_key_.ForEach([&](uint64_t key, uint32_t row) {
    const uint64_t at = uint64_t{row} * dim_;
    out->ids.push_back(key);
    out->values.insert(out->values.end(), values_.begin() + at,
                       values_.begin() + at + dim_);
    for (int k = 0; k < arrays; ++k) {
      const float* state = optimizer_.array(k) + at;
      out->state[k].insert(out->state[k].end(), state, state + dim_);
    }
    out->last_update.push_back(last_update_[row]);
  });
  return Status::OK();
}

Status ExactTable::PrepareRestore(TableTarget* target) {
  target->state_arrays = optimizer_.arrays();
  return Status::OK();
}

Status ExactTable::FinishRestore(TableTarget* target) {
  const TableSnapshot& saved = target->exact;
  if (saved.ids.size() > capacity_) {
    return ResourceExhausted("restoring " + Where(spec()) + ": " +
                             std::to_string(saved.ids.size()) +
                             " keys exceed its capacity of " +
                             std::to_string(capacity_) + " rows per shard");
  }
  std::lock_guard<std::mutex> lock(mu_);
  FreeAllRows();  // an earlier candidate's rows must not stay
  // Oldest first, so the least-recently-updated list comes out in order.
  std::vector<size_t> order(saved.ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return saved.last_update[a] < saved.last_update[b];
  });
  for (size_t i : order) {
    const uint32_t row = AllocateRow(saved.ids[i]);
    if (row == kNoRow) {
      FreeAllRows();
      return ResourceExhausted("restoring " + Where(spec()) +
                               ": no memory for key " +
                               std::to_string(saved.ids[i]));
    }
    const uint64_t at = uint64_t{row} * dim_;
    std::copy_n(&saved.values[i * dim_], dim_, values_.data() + at);
    for (int k = 0; k < optimizer_.arrays(); ++k) {
      std::copy_n(&saved.state[k][i * dim_], dim_, optimizer_.array(k) + at);
    }
    Touch(row, saved.last_update[i]);
  }
  optimizer_.set_steps(target->optimizer_steps);
  return Status::OK();
}

}  // namespace ps::table
