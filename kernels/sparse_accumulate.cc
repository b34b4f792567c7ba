#include "kernels/sparse_accumulate.h"

#include <algorithm>
#include <atomic>
#include <string>

namespace ps::kernels {
namespace {

// Rows are scattered over a table far larger than the caches, so each add is a
// cache miss. Prefetching the row a few iterations ahead overlaps those misses;
// this matters most for the atomic path, where a locked instruction cannot
// start until its line is in the cache. (Prefetches are not ordered by locked
// instructions, so they still run ahead.)
constexpr size_t kPrefetchDistance = 16;

// Relaxed: accumulation needs atomicity, not ordering. Whoever reads the sum
// synchronizes with the adders by other means (join, flush, a release store).
inline void AtomicAdd(float* target, float value) {
  std::atomic_ref<float>(*target).fetch_add(value, std::memory_order_relaxed);
}

inline void PrefetchForWrite(const float* p) { __builtin_prefetch(p, 1, 3); }

Status CheckBounds(std::span<const uint32_t> rows, uint64_t num_rows) {
  // A branch-free max first (vectorizes); search for the culprit only when
  // the max shows there is one.
  uint32_t max_row = 0;
  for (uint32_t row : rows) max_row = std::max(max_row, row);
  if (rows.empty() || max_row < num_rows) return Status::OK();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= num_rows) {
      return OutOfRange("sparse accumulate: index " + std::to_string(i) +
                        " is row " + std::to_string(rows[i]) +
                        ", past the end of a table of " +
                        std::to_string(num_rows) + " rows");
    }
  }
  return Status::OK();
}

void AtomicScalarRows(const uint32_t* rows, const float* values, size_t n,
                      float* table) {
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchDistance < n) {
      PrefetchForWrite(table + rows[i + kPrefetchDistance]);
    }
    AtomicAdd(table + rows[i], values[i]);
  }
}

void AtomicVectorRows(const uint32_t* rows, const float* values, size_t n,
                      size_t dim, float* table) {
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchDistance < n) {
      const float* ahead = table + rows[i + kPrefetchDistance] * dim;
      PrefetchForWrite(ahead);
      PrefetchForWrite(ahead + dim - 1);
    }
    float* row = table + rows[i] * dim;
    const float* v = values + i * dim;
    for (size_t j = 0; j < dim; ++j) AtomicAdd(row + j, v[j]);
  }
}

void ExclusiveScalarRows(const uint32_t* rows, const float* values, size_t n,
                         float* table) {
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchDistance < n) {
      PrefetchForWrite(table + rows[i + kPrefetchDistance]);
    }
    table[rows[i]] += values[i];
  }
}

void ExclusiveVectorRows(const uint32_t* rows, const float* values, size_t n,
                         size_t dim, float* table) {
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchDistance < n) {
      const float* ahead = table + rows[i + kPrefetchDistance] * dim;
      PrefetchForWrite(ahead);
      PrefetchForWrite(ahead + dim - 1);
    }
    float* __restrict row = table + rows[i] * dim;
    const float* __restrict v = values + i * dim;
    for (size_t j = 0; j < dim; ++j) row[j] += v[j];
  }
}

}  // namespace

Status AccumulateRows(std::span<const uint32_t> rows,
                      std::span<const float> values, DenseRows table,
                      AccumulateMode mode) {
  if (rows.empty()) return Status::OK();
  if (table.dim == 0 || table.data == nullptr) {
    return InvalidArgument("sparse accumulate: table has no storage (dim " +
                           std::to_string(table.dim) + ")");
  }
  if (values.size() != rows.size() * table.dim) {
    return InvalidArgument("sparse accumulate: " + std::to_string(rows.size()) +
                           " rows of dim " + std::to_string(table.dim) +
                           " need " + std::to_string(rows.size() * table.dim) +
                           " values, got " + std::to_string(values.size()));
  }
  PS_RETURN_IF_ERROR(CheckBounds(rows, table.num_rows));

  const size_t n = rows.size();
  const size_t dim = table.dim;
  if (mode == AccumulateMode::kAtomic) {
    if (dim == 1) {
      AtomicScalarRows(rows.data(), values.data(), n, table.data);
    } else {
      AtomicVectorRows(rows.data(), values.data(), n, dim, table.data);
    }
  } else {
    if (dim == 1) {
      ExclusiveScalarRows(rows.data(), values.data(), n, table.data);
    } else {
      ExclusiveVectorRows(rows.data(), values.data(), n, dim, table.data);
    }
  }
  return Status::OK();
}

}  // namespace ps::kernels
