#include "kernels/sparse_accumulate.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "base/sanitizers.h"
#include "kernels/cpu_features.h"
#include "kernels/row_bounds.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ps::kernels {
namespace {

// Rows are scattered over a table far larger than the private caches, so
// each add is a miss, and one thread goes only as fast as it keeps misses in
// flight. So the loops ask for the line of the add kAheadLines ahead (for
// wide rows: the row that many lines ahead) before they do the add at hand:
// the adds happen in the order given, one at a time, while later lines are
// already on their way. 64 lines ahead covers a last-level-cache (or DRAM)
// round trip at the few ns an add costs; 16, as before, left the core
// waiting (measured: 5.0 vs 3.6-3.9 ns per dim-1 add on a 10M-row table).
//
// The adds are not reordered (no sort, no grouping by row): a packet's rows
// are strictly increasing already (protocol/sparse_packet.h), so sorting
// could not improve its locality, and keeping the order keeps the float
// sums exactly those of the plain loop in the order the caller gives, which
// the BSP exactness tests (tests/ps/ps_bsp_test.cc) compare bit for bit.
constexpr size_t kAheadLines = 64;
constexpr size_t kLineFloats = 64 / sizeof(float);

// Relaxed: accumulation needs atomicity, not ordering. Whoever reads the sum
// synchronizes with the adders by other means (join, flush, a release store).
inline void AtomicAdd(float* target, float value) {
  std::atomic_ref<float>(*target).fetch_add(value, std::memory_order_relaxed);
}

// Asks for the line holding p in a state that allows writing (PREFETCHW on
// x86, which CPUs without it run as a no-op), so the add that follows does
// not wait for a second, ownership request. (Prefetches are not ordered by
// locked instructions, so they run ahead of the atomic path too.)
inline void PrefetchForWrite(const float* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

// Prefetches every line of a row of `dim` floats.
inline void PrefetchRow(const float* row, size_t dim) {
  for (size_t j = 0; j < dim; j += kLineFloats) PrefetchForWrite(row + j);
  // The row may straddle one more line (a one-float row cannot).
  if (dim > 1) PrefetchForWrite(row + dim - 1);
}

// Rows ahead for a row of `dim` floats: kAheadLines lines' worth, >= 2.
size_t AheadRows(size_t dim) {
  const size_t lines = (dim + kLineFloats - 1) / kLineFloats;
  return std::max<size_t>(2, kAheadLines / lines);
}

// One loop for all four paths: add(i) folds entry i into the table.
template <typename Add>
inline void ScatteredLoop(const uint32_t* rows, size_t n, size_t dim,
                          const float* table, Add add) {
  const size_t ahead = dim == 1 ? kAheadLines : AheadRows(dim);
  size_t i = 0;
  if (n > ahead) {
    for (; i < n - ahead; ++i) {
      if (dim == 1) {
        PrefetchForWrite(table + rows[i + ahead]);
      } else {
        PrefetchRow(table + size_t{rows[i + ahead]} * dim, dim);
      }
      add(i);
    }
  }
  for (; i < n; ++i) add(i);
}

void AtomicScalarRows(const uint32_t* rows, const float* values, size_t n,
                      float* table) {
  ScatteredLoop(rows, n, 1, table,
                [&](size_t i) { AtomicAdd(table + rows[i], values[i]); });
}

void AtomicVectorRows(const uint32_t* rows, const float* values, size_t n,
                      size_t dim, float* table) {
  ScatteredLoop(rows, n, dim, table, [&](size_t i) {
    float* row = table + size_t{rows[i]} * dim;
    const float* v = values + i * dim;
    for (size_t j = 0; j < dim; ++j) AtomicAdd(row + j, v[j]);
  });
}

void ExclusiveScalarRows(const uint32_t* rows, const float* values, size_t n,
                         float* table) {
  ScatteredLoop(rows, n, 1, table,
                [&](size_t i) { table[rows[i]] += values[i]; });
}

void ExclusiveVectorRows(const uint32_t* rows, const float* values, size_t n,
                         size_t dim, float* table) {
  ScatteredLoop(rows, n, dim, table, [&](size_t i) {
    float* __restrict row = table + size_t{rows[i]} * dim;
    const float* __restrict v = values + i * dim;
    for (size_t j = 0; j < dim; ++j) row[j] += v[j];
  });
}

#if (defined(__x86_64__) || defined(__i386__)) && !defined(PS_TSAN)
// The atomic path with hardware transactions. A locked float add (a CAS
// loop) costs ~8 ns even when its line is in L1, since each locked
// instruction waits for the ones before it: that, not the misses, bounds the
// atomic path (~120 M adds/s at best). Inside an RTM transaction the adds of
// a batch are plain loads and stores, yet the batch is atomic against every
// other thread's transactions and locked adds: a conflict aborts it, nothing
// of it is written, and the batch is redone with locked adds. So no update
// is lost either way. Batches stay small (kTxLines lines written) so they
// fit the L1 cache that holds a transaction's writes, and their lines are
// prefetched outside the transaction. Once more than about one batch in
// kAbortProbe has aborted (heavy contention, or a CPU whose microcode makes
// every transaction abort), the call does the rest with locked adds.
//
// (ThreadSanitizer builds leave this out: TSan cannot see that the plain
// adds are transactional and would report them as races.)
#define PS_ACCUMULATE_RTM 1
constexpr size_t kTxLines = 16;
constexpr size_t kAbortProbe = 8;

__attribute__((target("rtm"))) void AtomicRowsTransactional(
    const uint32_t* rows, const float* values, size_t n, size_t dim,
    float* table) {
  const size_t lines = (dim + kLineFloats - 1) / kLineFloats;
  const size_t batch = std::max<size_t>(1, kTxLines / lines);
  const size_t ahead = AheadRows(dim);
  size_t i = 0, batches = 0, aborts = 0;
  for (; i + batch <= n; i += batch) {
    // Given up: more than one batch in kAbortProbe aborted.
    if (aborts * kAbortProbe > batches + kAbortProbe) break;
    ++batches;
    for (size_t k = i + ahead; k < std::min(n, i + ahead + batch); ++k)
      PrefetchRow(table + size_t{rows[k]} * dim, dim);
    if (_xbegin() == _XBEGIN_STARTED) {
      for (size_t k = i; k < i + batch; ++k) {
        float* row = table + size_t{rows[k]} * dim;
        const float* v = values + k * dim;
        for (size_t j = 0; j < dim; ++j) row[j] += v[j];
      }
      _xend();
      continue;
    }
    ++aborts;  // a conflict, a capacity or page-fault abort: lock instead
    for (size_t k = i; k < i + batch; ++k) {
      float* row = table + size_t{rows[k]} * dim;
      const float* v = values + k * dim;
      for (size_t j = 0; j < dim; ++j) AtomicAdd(row + j, v[j]);
    }
  }
  // The rest (the last partial batch, or all after giving up) with locks.
  rows += i;
  values += i * dim;
  n -= i;
  if (dim == 1) {
    AtomicScalarRows(rows, values, n, table);
  } else {
    AtomicVectorRows(rows, values, n, dim, table);
  }
}
#endif

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
  PS_RETURN_IF_ERROR(
      internal::CheckRowBounds(rows, table.num_rows, "sparse accumulate"));

  const size_t n = rows.size();
  const size_t dim = table.dim;
  if (mode == AccumulateMode::kAtomic) {
#ifdef PS_ACCUMULATE_RTM
    if (ActiveCpuFeatures().rtm) {
      AtomicRowsTransactional(rows.data(), values.data(), n, dim, table.data);
      return Status::OK();
    }
#endif
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
