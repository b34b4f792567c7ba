// Sparse detection: which entries of a dense fp32 gradient are worth sending.
//
// Gradients may hold up to 2^32 entries (a table shard addressed by uint32
// row indices); larger inputs are rejected with OutOfRange. Results are the
// selected indices in increasing order, written into a caller-owned vector
// (cleared first, capacity reused). Work is split over `pool` when given.
//
// NaN entries are never selected by a threshold and rank like zero in top-k.
// Each function has an AVX2 path (chosen at run time through
// ActiveCpuFeatures()) and a scalar one; both select exactly the same set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/thread_pool.h"

namespace ps::kernels {

// The most entries (or rows) one detection accepts: indices are uint32.
inline constexpr uint64_t kMaxDetectEntries = uint64_t{1} << 32;

// Indices i with |g[i]| >= epsilon. epsilon must be >= 0 and not NaN
// (epsilon 0 selects every non-NaN entry; an infinite epsilon the infinite
// entries; denormals compare as the numbers they are, unless the calling
// thread has set the CPU's denormals-are-zero mode). With `values`, also
// g[i] for each selected i, in the same order (cleared first, capacity
// reused). One pass over the gradient: compare and compaction together.
Status DetectThreshold(std::span<const float> gradient, float epsilon,
                       ThreadPool* pool, std::vector<uint32_t>* indices,
                       std::vector<float>* values = nullptr);

// The k entries of largest |g| (all of them when k >= size), ties broken by
// the lower index: exact and deterministic, whatever the thread count.
Status DetectTopK(std::span<const float> gradient, size_t k, ThreadPool* pool,
                  std::vector<uint32_t>* indices);

// How a row of `dim` values is measured.
enum class RowNorm : uint8_t {
  kL2 = 0,      // sqrt(sum v^2), summed in a fixed order (8 lanes, then
                // pairwise), so every path gives the same bits
  kMaxAbs = 1,  // max |v|
};

// The norm of every row of a row-major [rows x dim] gradient into `norms`
// (resized to rows).
Status ComputeRowNorms(std::span<const float> gradient, size_t dim,
                       RowNorm norm, ThreadPool* pool,
                       std::vector<float>* norms);

// Rows (of `dim` values each; gradient.size() must be a multiple of dim)
// whose norm is >= epsilon, as row indices. `scratch` holds the norms
// between calls (may be null: a temporary is used).
Status DetectRowsThreshold(std::span<const float> gradient, size_t dim,
                           RowNorm norm, float epsilon, ThreadPool* pool,
                           std::vector<uint32_t>* rows,
                           std::vector<float>* scratch = nullptr);

// The k rows of largest norm, ties broken by the lower row index.
Status DetectRowsTopK(std::span<const float> gradient, size_t dim, RowNorm norm,
                      size_t k, ThreadPool* pool, std::vector<uint32_t>* rows,
                      std::vector<float>* scratch = nullptr);

namespace internal {
// The threshold scan over [begin, end) of `g` with the AVX2 or the scalar
// scanner, appending to `out`; exposed so tests can compare the two. `avx2`
// needs a CPU with AVX2.
void ThresholdScan(bool avx2, const float* g, size_t begin, size_t end,
                   float eps, std::vector<uint32_t>* out);
}  // namespace internal

}  // namespace ps::kernels
