// CUDA implementations of kernels/cuda/device_optimizers.h. The element
// updates follow kernels/internal/optimizer_kernels.h and the FTRL loop of
// kernels/optimizers.cc operation for operation; nvcc may contract a * b + c
// into an FMA, as the CPU's AVX2 path does, so results agree with the CPU to
// float rounding (sum and SGD adds are single roundings and agree exactly
// for the same order).
//
// Thread mapping: a packet entry (or a group of entries of one row) gets
// `lanes` consecutive threads, a power of two up to a warp, each walking the
// columns j = lane, lane + lanes, ... < dim, so a warp reads and writes
// whole rows contiguously and no per-element division is needed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/device_optimizers.h"
#include "kernels/internal/optimizer_kernels.h"

namespace ps::kernels::gpu {
namespace {

constexpr int kThreads = 256;

// log2 of the threads per row: dim rounded up to a power of two, capped at
// a warp.
int LaneShift(uint32_t dim) {
  int shift = 0;
  while (shift < 5 && (1u << shift) < dim) ++shift;
  return shift;
}

unsigned GridFor(size_t items, int lane_shift) {
  const size_t per_block = kThreads >> lane_shift;
  const size_t blocks = (items + per_block - 1) / per_block;
  // Grid-stride loops cover the rest; the cap keeps the grid a valid size.
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 65535u * 16u));
}

// cudaGetLastError also returns (and clears) the error of any earlier failed
// runtime call on this thread, e.g. a cudaMalloc the caller already
// reported: cleared before a launch, so LaunchError names only the launch.
void ClearStaleError() { (void)cudaGetLastError(); }

Status LaunchError(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::OK();
  return Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

// Whether an invalid packet's guard holds this kernel back (see the header).
__device__ bool Held(const uint64_t* guard) {
  return guard != nullptr && *guard != kApplyGuardClear;
}

// The stateful updates. Each rule steps one parameter with its state,
// x = {w, state 0, state 1 (Adam and FTRL)}, once per gradient (in packet
// order); GroupedKernel loads and stores x.
struct MomentumRule {
  static constexpr int kStates = 1;
  float learning_rate, momentum;
  __device__ void Step(float* x, float g) const {
    float &w = x[0], &v = x[1];
    v = momentum * v + g;
    w -= learning_rate * v;
  }
};

struct AdagradRule {
  static constexpr int kStates = 1;
  float learning_rate, epsilon;
  __device__ void Step(float* x, float g) const {
    float &w = x[0], &acc = x[1];
    acc += g * g;
    w -= learning_rate * g / (sqrtf(acc) + epsilon);
  }
};

struct AdamRule {
  static constexpr int kStates = 2;
  float learning_rate, beta1, beta2, epsilon, inv_bias1, inv_bias2;
  __device__ void Step(float* x, float g) const {
    float &w = x[0], &m = x[1], &v = x[2];
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    const float m_hat = m * inv_bias1;
    const float v_hat = v * inv_bias2;
    w -= learning_rate * m_hat / (sqrtf(v_hat) + epsilon);
  }
};

struct FtrlRule {
  static constexpr int kStates = 2;
  float alpha, beta, l1, l2;
  __device__ void Step(float* x, float g) const {
    float &w = x[0], &z = x[1], &n = x[2];
    const float n_new = n + g * g;
    const float sqrt_n_new = sqrtf(n_new);
    const float sigma = (sqrt_n_new - sqrtf(n)) / alpha;
    z += g - sigma * w;
    n = n_new;
    if (fabsf(z) <= l1) {
      w = 0.0f;
    } else {
      w = -(z - copysignf(l1, z)) / ((beta + sqrt_n_new) / alpha + l2);
    }
  }
};

// kWidth columns as one load or store: a float, or a float4 (one 16-byte
// access) where rows are a multiple of 4 floats at 16-byte aligned
// addresses.
template <int kWidth>
struct Columns;
template <>
struct Columns<1> {
  using Vec = float;
  __device__ static void Split(float v, float* out) { out[0] = v; }
  __device__ static float Join(const float* in) { return in[0]; }
  __device__ static void AtomicAdd(float* w, float v, float scale) {
    atomicAdd(w, scale * v);
  }
};
template <>
struct Columns<4> {
  using Vec = float4;
  __device__ static void Split(float4 v, float* out) {
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  }
  __device__ static float4 Join(const float* in) {
    return {in[0], in[1], in[2], in[3]};
  }
  // Hopper (sm_90) adds a float4 in one atomic instruction, each of its
  // four floats atomically, as four atomicAdds would: a quarter of the
  // atomics, which at dim 16 is what keeps the sum kernel near the card's
  // copy bandwidth.
  __device__ static void AtomicAdd(float4* w, float4 v, float scale) {
    const float4 add{scale * v.x, scale * v.y, scale * v.z, scale * v.w};
#if __CUDA_ARCH__ >= 900
    atomicAdd(w, add);
#else
    atomicAdd(&w->x, add.x);
    atomicAdd(&w->y, add.y);
    atomicAdd(&w->z, add.z);
    atomicAdd(&w->w, add.w);
#endif
  }
};

bool Aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Whether the kernels may take `t`'s rows (and `states` state arrays) and
// `grads` four columns at a time.
bool QuadsFit(const DeviceTable& t, const float* grads, int states) {
  bool fit = t.dim % 4 == 0 && Aligned16(t.params) && Aligned16(grads);
  for (int s = 0; s < states; ++s) fit &= Aligned16(t.state[s]);
  return fit;
}

// sum and sgd: `lanes` threads per packet entry add scale x its gradient
// to its row, kWidth columns per atomic.
template <int kWidth>
__global__ void AddKernel(DeviceTable t, const uint32_t* rows,
                          const float* grads, size_t count, float scale,
                          int lane_shift, const uint64_t* guard) {
  using C = Columns<kWidth>;
  using Vec = typename C::Vec;
  if (Held(guard)) return;
  const uint32_t lanes = 1u << lane_shift;
  const uint32_t lane = threadIdx.x & (lanes - 1);
  const uint32_t slices = t.dim / kWidth;
  const size_t per_block = blockDim.x >> lane_shift;
  for (size_t i = blockIdx.x * per_block + (threadIdx.x >> lane_shift);
       i < count; i += size_t{gridDim.x} * per_block) {
    const uint32_t row = rows[i];
    if (row >= t.num_rows) continue;  // CheckRows refused it already
    auto* w = reinterpret_cast<Vec*>(t.params + size_t{row} * t.dim);
    const auto* g = reinterpret_cast<const Vec*>(grads + i * t.dim);
    for (uint32_t j = lane; j < slices; j += lanes) {
      C::AtomicAdd(w + j, g[j], scale);
    }
  }
}

// One set of `lanes` threads per group of entries with the same row; each
// thread owns some kWidth-column slices of that row, loads them and their
// state, applies the group's gradients in order and stores them back.
// order/starts null: entry g is group g. With kWidth 4 a warp has more rows
// in flight, which is what random rows of 16 or 32 floats need.
template <typename Rule, int kWidth>
__global__ void GroupedKernel(Rule rule, DeviceTable t, const uint32_t* rows,
                              const float* grads, const uint32_t* order,
                              const uint32_t* starts, size_t groups,
                              int lane_shift, const uint64_t* guard) {
  using C = Columns<kWidth>;
  using Vec = typename C::Vec;
  constexpr int kArrays = 1 + Rule::kStates;
  if (Held(guard)) return;
  const uint32_t lanes = 1u << lane_shift;
  const uint32_t lane = threadIdx.x & (lanes - 1);
  const uint32_t slices = t.dim / kWidth;
  const size_t per_block = blockDim.x >> lane_shift;
  float* arrays[kArrays] = {t.params};
  for (int a = 1; a < kArrays; ++a) arrays[a] = t.state[a - 1];
  for (size_t grp = blockIdx.x * per_block + (threadIdx.x >> lane_shift);
       grp < groups; grp += size_t{gridDim.x} * per_block) {
    const size_t begin = starts != nullptr ? starts[grp] : grp;
    const size_t end = starts != nullptr ? starts[grp + 1] : grp + 1;
    const size_t first = order != nullptr ? order[begin] : begin;
    const uint32_t row = rows[first];
    if (row >= t.num_rows) continue;         // CheckRows refused it already
    const size_t at = size_t{row} * slices;  // in Vecs
    for (uint32_t j = lane; j < slices; j += lanes) {
      float loaded[kArrays][kWidth];
      for (int a = 0; a < kArrays; ++a) {
        C::Split(reinterpret_cast<const Vec*>(arrays[a])[at + j], loaded[a]);
      }
      float x[kWidth][kArrays];
      for (int c = 0; c < kWidth; ++c) {
        for (int a = 0; a < kArrays; ++a) x[c][a] = loaded[a][c];
      }
      for (size_t k = begin; k < end; ++k) {
        const size_t i = order != nullptr ? order[k] : k;
        float g[kWidth];
        C::Split(reinterpret_cast<const Vec*>(grads + i * t.dim)[j], g);
        for (int c = 0; c < kWidth; ++c) rule.Step(x[c], g[c]);
      }
      for (int a = 0; a < kArrays; ++a) {
        for (int c = 0; c < kWidth; ++c) loaded[a][c] = x[c][a];
        reinterpret_cast<Vec*>(arrays[a])[at + j] = C::Join(loaded[a]);
      }
    }
  }
}

template <typename Rule>
Status LaunchGrouped(const Rule& rule, const DeviceTable& t,
                     const uint32_t* rows, const float* grads,
                     const uint32_t* order, const uint32_t* starts,
                     size_t groups, void* stream, const uint64_t* guard,
                     const char* what) {
  const bool quads = QuadsFit(t, grads, Rule::kStates);
  const int shift = LaneShift(quads ? t.dim / 4 : t.dim);
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  ClearStaleError();
  if (quads) {
    GroupedKernel<Rule, 4>
        <<<GridFor(groups, shift), kThreads, 0, cuda_stream>>>(
            rule, t, rows, grads, order, starts, groups, shift, guard);
  } else {
    GroupedKernel<Rule, 1>
        <<<GridFor(groups, shift), kThreads, 0, cuda_stream>>>(
            rule, t, rows, grads, order, starts, groups, shift, guard);
  }
  return LaunchError(what);
}

}  // namespace

Status CheckRows(std::span<const uint32_t> rows, uint64_t num_rows) {
  // The maximum first: a loop without an early exit vectorizes, and this
  // runs on every packet; the index is searched for only when one is bad.
  uint32_t max_row = 0;
  for (uint32_t row : rows) max_row = std::max(max_row, row);
  if (rows.empty() || max_row < num_rows) return Status::OK();
  const auto bad = std::find_if(rows.begin(), rows.end(),
                                [&](uint32_t r) { return r >= num_rows; });
  return OutOfRange("device apply: index " +
                    std::to_string(bad - rows.begin()) + " is row " +
                    std::to_string(*bad) + ", past the end of a table of " +
                    std::to_string(num_rows) + " rows");
}

bool GroupRows(std::span<const uint32_t> rows, std::vector<uint32_t>* order,
               std::vector<uint32_t>* starts) {
  order->clear();
  starts->clear();
  // (row, index) in one key: sorting the keys sorts by row and keeps packet
  // order within a row, i.e. a stable sort.
  std::vector<uint64_t> keys(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    keys[i] = (uint64_t{rows[i]} << 32) | i;
  }
  std::sort(keys.begin(), keys.end());
  bool repeats = false;
  for (size_t k = 1; k < keys.size() && !repeats; ++k) {
    repeats = (keys[k] >> 32) == (keys[k - 1] >> 32);
  }
  if (!repeats) return false;
  order->resize(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    (*order)[k] = static_cast<uint32_t>(keys[k]);
    if (k == 0 || (keys[k] >> 32) != (keys[k - 1] >> 32)) {
      starts->push_back(static_cast<uint32_t>(k));
    }
  }
  starts->push_back(static_cast<uint32_t>(keys.size()));
  return true;
}

Status LaunchAddRows(DeviceTable table, const uint32_t* rows,
                     const float* grads, size_t count, float scale,
                     void* stream, const uint64_t* guard) {
  if (count == 0) return Status::OK();
  if (table.dim == 0 || table.params == nullptr) {
    return InvalidArgument("device add: table has no parameter storage");
  }
  const bool quads = QuadsFit(table, grads, 0);
  const int shift = LaneShift(quads ? table.dim / 4 : table.dim);
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  ClearStaleError();
  if (quads) {
    AddKernel<4><<<GridFor(count, shift), kThreads, 0, cuda_stream>>>(
        table, rows, grads, count, scale, shift, guard);
  } else {
    AddKernel<1><<<GridFor(count, shift), kThreads, 0, cuda_stream>>>(
        table, rows, grads, count, scale, shift, guard);
  }
  return LaunchError("device add");
}

Status LaunchOptimizerRows(const OptimizerConfig& config, uint64_t step,
                           DeviceTable table, const uint32_t* rows,
                           const float* grads, size_t count,
                           const uint32_t* order, const uint32_t* starts,
                           size_t groups, void* stream, const uint64_t* guard) {
  if (const auto* sgd = std::get_if<SgdConfig>(&config)) {
    return LaunchAddRows(table, rows, grads, count, -sgd->learning_rate, stream,
                         guard);
  }
  const int states = StateFloatsPerParameter(config);
  if (std::holds_alternative<AdamConfig>(config) && step == 0) {
    return InvalidArgument("adam: the step count starts at 1, got 0");
  }
  if (count == 0 || groups == 0) return Status::OK();
  if (table.dim == 0 || table.params == nullptr) {
    return InvalidArgument("device optimizer: table has no parameter storage");
  }
  for (int s = 0; s < states; ++s) {
    if (table.state[s] == nullptr) {
      return InvalidArgument("device optimizer: state array " +
                             std::to_string(s) + " is missing");
    }
  }
  if ((order == nullptr) != (starts == nullptr) ||
      (order == nullptr && groups != count)) {
    return InvalidArgument(
        "device optimizer: order and starts go together; without them "
        "every entry is its own group");
  }
  if (const auto* c = std::get_if<MomentumConfig>(&config)) {
    return LaunchGrouped(MomentumRule{c->learning_rate, c->momentum}, table,
                         rows, grads, order, starts, groups, stream, guard,
                         "device momentum");
  }
  if (const auto* c = std::get_if<AdagradConfig>(&config)) {
    return LaunchGrouped(AdagradRule{c->learning_rate, c->epsilon}, table, rows,
                         grads, order, starts, groups, stream, guard,
                         "device adagrad");
  }
  if (const auto* c = std::get_if<AdamConfig>(&config)) {
    const internal::AdamStepConstants k =
        internal::MakeAdamStepConstants(*c, step);
    return LaunchGrouped(AdamRule{k.learning_rate, k.beta1, k.beta2, k.epsilon,
                                  k.inv_bias1, k.inv_bias2},
                         table, rows, grads, order, starts, groups, stream,
                         guard, "device adam");
  }
  const auto& c = std::get<FtrlConfig>(config);
  return LaunchGrouped(FtrlRule{c.alpha, c.beta, c.l1, c.l2}, table, rows,
                       grads, order, starts, groups, stream, guard,
                       "device ftrl");
}

}  // namespace ps::kernels::gpu
