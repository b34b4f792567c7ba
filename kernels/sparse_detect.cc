#include "kernels/sparse_detect.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "kernels/cpu_features.h"
#include "kernels/sparse_detect_internal.h"

namespace ps::kernels {
namespace internal {

// The scalar scanners write like the AVX2 ones: the index always, the count
// advanced by the comparison, so there is no branch on the data.
size_t ScanGeEpsScalar(const float* g, size_t begin, size_t end, float eps,
                       uint32_t* dst, float* values) {
  size_t n = 0;
  for (size_t i = begin; i < end; ++i) {
    dst[n] = static_cast<uint32_t>(i);
    if (values != nullptr) values[n] = g[i];
    n += std::fabs(g[i]) >= eps ? 1 : 0;
  }
  return n;
}

size_t ScanGeKeyScalar(const float* g, size_t begin, size_t end, uint32_t key,
                       uint32_t* dst, float* values) {
  size_t n = 0;
  for (size_t i = begin; i < end; ++i) {
    dst[n] = static_cast<uint32_t>(i);
    if (values != nullptr) values[n] = g[i];
    n += MagnitudeKey(std::bit_cast<uint32_t>(g[i])) >= key ? 1 : 0;
  }
  return n;
}

}  // namespace internal

namespace {

using internal::kScanBlock;
using internal::kScanSlack;
using internal::MagnitudeKey;

// Large enough that a chunk amortizes waking a thread.
constexpr size_t kMinChunk = size_t{1} << 16;

bool UseAvx2() { return ActiveCpuFeatures().avx2; }

Status CheckSize(size_t n, const char* what) {
  if (uint64_t{n} > kMaxDetectEntries)
    return OutOfRange(std::string(what) + " has " + std::to_string(n) +
                      " entries; uint32 indices address at most 2^32");
  return Status::OK();
}

int Chunks(ThreadPool* pool) { return pool == nullptr ? 1 : pool->size(); }

// One block scanner: scan(begin, end, dst, values) -> count (see
// sparse_detect_internal.h).
using BlockScan = std::function<size_t(size_t, size_t, uint32_t*, float*)>;

// Scans [begin, end) block by block into buffers that stay in the L1 cache
// and appends each block's survivors to `indices` (and `values`): one pass
// over the gradient, and the output is written once, densely.
void ScanAppend(size_t begin, size_t end, const BlockScan& scan,
                std::vector<uint32_t>* indices, std::vector<float>* values) {
  alignas(32) uint32_t idx[kScanBlock + kScanSlack];
  alignas(32) float val[kScanBlock + kScanSlack];
  for (size_t b = begin; b < end; b += kScanBlock) {
    const size_t e = std::min(end, b + kScanBlock);
    const size_t n = scan(b, e, idx, values != nullptr ? val : nullptr);
    indices->insert(indices->end(), idx, idx + n);
    if (values != nullptr) values->insert(values->end(), val, val + n);
  }
}

// Runs ScanAppend per chunk of the pool and concatenates the chunks in
// order, which is index order. `indices` and `values` were cleared.
void ScanParallel(size_t n, ThreadPool* pool, const BlockScan& scan,
                  std::vector<uint32_t>* indices, std::vector<float>* values) {
  if (Chunks(pool) == 1 || n < 2 * kMinChunk) {
    ScanAppend(0, n, scan, indices, values);
    return;
  }
  struct Part {
    std::vector<uint32_t> indices;
    std::vector<float> values;
  };
  std::vector<Part> parts(Chunks(pool));
  ParallelFor(pool, n, kMinChunk, [&](size_t b, size_t e, int c) {
    ScanAppend(b, e, scan, &parts[c].indices,
               values != nullptr ? &parts[c].values : nullptr);
  });
  for (const Part& p : parts) {
    indices->insert(indices->end(), p.indices.begin(), p.indices.end());
    if (values != nullptr)
      values->insert(values->end(), p.values.begin(), p.values.end());
  }
}

}  // namespace

namespace internal {

void ThresholdScan(bool avx2, const float* g, size_t begin, size_t end,
                   float eps, std::vector<uint32_t>* out) {
  ScanAppend(
      begin, end,
      [&](size_t b, size_t e, uint32_t* d, float* v) {
        return avx2 ? ScanGeEpsAvx2(g, b, e, eps, d, v)
                    : ScanGeEpsScalar(g, b, e, eps, d, v);
      },
      out, nullptr);
}

}  // namespace internal

Status DetectThreshold(std::span<const float> gradient, float epsilon,
                       ThreadPool* pool, std::vector<uint32_t>* indices,
                       std::vector<float>* values) {
  indices->clear();
  if (values != nullptr) values->clear();
  PS_RETURN_IF_ERROR(CheckSize(gradient.size(), "gradient"));
  if (!(epsilon >= 0.0f))
    return InvalidArgument("threshold epsilon must be >= 0, got " +
                           std::to_string(epsilon));
  const float* g = gradient.data();
  const bool avx2 = UseAvx2();
  ScanParallel(
      gradient.size(), pool,
      [&](size_t b, size_t e, uint32_t* d, float* v) {
        return avx2 ? internal::ScanGeEpsAvx2(g, b, e, epsilon, d, v)
                    : internal::ScanGeEpsScalar(g, b, e, epsilon, d, v);
      },
      indices, values);
  return Status::OK();
}

Status DetectTopK(std::span<const float> gradient, size_t k, ThreadPool* pool,
                  std::vector<uint32_t>* indices) {
  indices->clear();
  const size_t n = gradient.size();
  PS_RETURN_IF_ERROR(CheckSize(n, "gradient"));
  if (k == 0 || n == 0) return Status::OK();
  if (k >= n) {
    indices->resize(n);
    for (size_t i = 0; i < n; ++i) (*indices)[i] = static_cast<uint32_t>(i);
    return Status::OK();
  }
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(gradient.data());
  const int chunks = Chunks(pool);

  // Pass 1: histogram of the top 11 bits of the magnitude key.
  constexpr int kShift = 20, kBuckets = 1 << (31 - kShift);
  std::vector<std::vector<uint64_t>> hist(chunks,
                                          std::vector<uint64_t>(kBuckets));
  ParallelFor(pool, n, kMinChunk, [&](size_t b, size_t e, int c) {
    uint64_t* h = hist[c].data();
    for (size_t i = b; i < e; ++i) ++h[MagnitudeKey(bits[i]) >> kShift];
  });
  // The bucket holding the k-th largest, and how many lie above it.
  uint64_t above = 0;
  int bucket = kBuckets - 1;
  for (;; --bucket) {
    uint64_t count = 0;
    for (int c = 0; c < chunks; ++c) count += hist[c][bucket];
    if (above + count >= k) break;
    above += count;
  }
  const uint64_t need = k - above;  // from `bucket`, >= 1

  // Pass 2: the keys in that bucket; the need-th largest is the cut key.
  std::vector<std::vector<uint32_t>> cand(chunks);
  ParallelFor(pool, n, kMinChunk, [&](size_t b, size_t e, int c) {
    auto& out = cand[c];
    for (size_t i = b; i < e; ++i) {
      uint32_t key = MagnitudeKey(bits[i]);
      if (static_cast<int>(key >> kShift) == bucket) out.push_back(key);
    }
  });
  std::vector<uint32_t> keys;
  for (auto& c : cand) keys.insert(keys.end(), c.begin(), c.end());
  std::nth_element(keys.begin(), keys.begin() + (need - 1), keys.end(),
                   std::greater<uint32_t>());
  const uint32_t cut = keys[need - 1];
  const uint64_t strictly_above =
      above + std::count_if(keys.begin(), keys.end(),
                            [&](uint32_t key) { return key > cut; });
  uint64_t ties_left = k - strictly_above;  // lowest indices with key == cut

  // Pass 3: everything >= cut, in index order; then keep all > cut and the
  // first ties_left equal to it.
  const float* g = gradient.data();
  const bool avx2 = UseAvx2();
  ScanParallel(
      n, pool,
      [&](size_t b, size_t e, uint32_t* d, float* v) {
        return avx2 ? internal::ScanGeKeyAvx2(g, b, e, cut, d, v)
                    : internal::ScanGeKeyScalar(g, b, e, cut, d, v);
      },
      indices, nullptr);
  size_t kept = 0;
  for (uint32_t i : *indices) {
    uint32_t key = MagnitudeKey(bits[i]);
    if (key > cut || (key == cut && ties_left > 0 && ties_left--)) {
      (*indices)[kept++] = i;
    }
  }
  indices->resize(kept);
  return Status::OK();
}

Status ComputeRowNorms(std::span<const float> gradient, size_t dim,
                       RowNorm norm, ThreadPool* pool,
                       std::vector<float>* norms) {
  if (dim == 0) return InvalidArgument("row dimension must be >= 1");
  if (gradient.size() % dim != 0)
    return InvalidArgument("gradient of " + std::to_string(gradient.size()) +
                           " values is not a whole number of rows of " +
                           std::to_string(dim));
  const size_t rows = gradient.size() / dim;
  PS_RETURN_IF_ERROR(CheckSize(rows, "row gradient"));
  if (norm != RowNorm::kL2 && norm != RowNorm::kMaxAbs)
    return InvalidArgument("unknown row norm");
  norms->resize(rows);
  const float* g = gradient.data();
  float* out = norms->data();
  ParallelFor(pool, rows, std::max<size_t>(1, kMinChunk / dim),
              [&](size_t b, size_t e, int) {
                for (size_t r = b; r < e; ++r) {
                  const float* v = g + r * dim;
                  if (norm == RowNorm::kMaxAbs) {
                    float m = 0.0f;
                    for (size_t j = 0; j < dim; ++j) {
                      float a = std::fabs(v[j]);
                      m = a > m ? a : m;
                    }
                    out[r] = m;
                    continue;
                  }
                  // Eight independent lanes, then a fixed pairwise sum: the
                  // same bits whether or not the compiler vectorizes.
                  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                  size_t j = 0;
                  for (; j + 8 <= dim; j += 8)
                    for (int l = 0; l < 8; ++l) acc[l] += v[j + l] * v[j + l];
                  for (int l = 0; j + l < dim; ++l)
                    acc[l] += v[j + l] * v[j + l];
                  float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) +
                            ((acc[1] + acc[5]) + (acc[3] + acc[7]));
                  out[r] = std::sqrt(s);
                }
              });
  return Status::OK();
}

Status DetectRowsThreshold(std::span<const float> gradient, size_t dim,
                           RowNorm norm, float epsilon, ThreadPool* pool,
                           std::vector<uint32_t>* rows,
                           std::vector<float>* scratch) {
  rows->clear();
  std::vector<float> local;
  std::vector<float>* norms = scratch != nullptr ? scratch : &local;
  PS_RETURN_IF_ERROR(ComputeRowNorms(gradient, dim, norm, pool, norms));
  return DetectThreshold(*norms, epsilon, pool, rows);
}

Status DetectRowsTopK(std::span<const float> gradient, size_t dim, RowNorm norm,
                      size_t k, ThreadPool* pool, std::vector<uint32_t>* rows,
                      std::vector<float>* scratch) {
  rows->clear();
  std::vector<float> local;
  std::vector<float>* norms = scratch != nullptr ? scratch : &local;
  PS_RETURN_IF_ERROR(ComputeRowNorms(gradient, dim, norm, pool, norms));
  return DetectTopK(*norms, k, pool, rows);
}

}  // namespace ps::kernels
