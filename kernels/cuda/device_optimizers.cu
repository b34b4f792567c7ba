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

__global__ void AddKernel(DeviceTable t, const uint32_t* rows,
                          const float* grads, size_t count, float scale,
                          int lane_shift, const uint64_t* guard) {
  if (Held(guard)) return;
  const uint32_t lanes = 1u << lane_shift;
  const uint32_t lane = threadIdx.x & (lanes - 1);
  const size_t per_block = blockDim.x >> lane_shift;
  for (size_t i = blockIdx.x * per_block + (threadIdx.x >> lane_shift);
       i < count; i += size_t{gridDim.x} * per_block) {
    const uint32_t row = rows[i];
    if (row >= t.num_rows) continue;  // CheckRows refused it already
    float* w = t.params + size_t{row} * t.dim;
    const float* g = grads + i * t.dim;
    for (uint32_t j = lane; j < t.dim; j += lanes) {
      atomicAdd(w + j, scale * g[j]);
    }
  }
}

// AddKernel four columns at a time, for rows of a multiple of 4 floats at
// 16-byte aligned addresses: Hopper (sm_90) adds a float4 in one atomic
// instruction (each of its four floats atomically, as four atomicAdds
// would), a quarter of the atomics of AddKernel; at dim 16 that is what
// keeps the kernel near the card's copy bandwidth. lane_shift counts lanes
// of float4 columns.
__global__ void AddKernel4(DeviceTable t, const uint32_t* rows,
                           const float* grads, size_t count, float scale,
                           int lane_shift, const uint64_t* guard) {
  if (Held(guard)) return;
  const uint32_t lanes = 1u << lane_shift;
  const uint32_t lane = threadIdx.x & (lanes - 1);
  const uint32_t quads = t.dim / 4;
  const size_t per_block = blockDim.x >> lane_shift;
  for (size_t i = blockIdx.x * per_block + (threadIdx.x >> lane_shift);
       i < count; i += size_t{gridDim.x} * per_block) {
    const uint32_t row = rows[i];
    if (row >= t.num_rows) continue;  // CheckRows refused it already
    auto* w = reinterpret_cast<float4*>(t.params + size_t{row} * t.dim);
    const auto* g = reinterpret_cast<const float4*>(grads + i * t.dim);
    for (uint32_t j = lane; j < quads; j += lanes) {
      const float4 v = g[j];
      const float4 add{scale * v.x, scale * v.y, scale * v.z, scale * v.w};
#if __CUDA_ARCH__ >= 900
      atomicAdd(w + j, add);
#else
      atomicAdd(&w[j].x, add.x);
      atomicAdd(&w[j].y, add.y);
      atomicAdd(&w[j].z, add.z);
      atomicAdd(&w[j].w, add.w);
#endif
    }
  }
}

bool Aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The stateful updates: Load the parameter and its state into registers,
// Step once per gradient (in packet order), Store back.
struct MomentumRule {
  float learning_rate, momentum;
  struct Value {
    float w, v;
  };
  __device__ Value Load(const DeviceTable& t, size_t at) const {
    return {t.params[at], t.state[0][at]};
  }
  __device__ void Step(Value& x, float g) const {
    x.v = momentum * x.v + g;
    x.w -= learning_rate * x.v;
  }
  __device__ void Store(const DeviceTable& t, size_t at, const Value& x) const {
    t.params[at] = x.w;
    t.state[0][at] = x.v;
  }
};

struct AdagradRule {
  float learning_rate, epsilon;
  struct Value {
    float w, acc;
  };
  __device__ Value Load(const DeviceTable& t, size_t at) const {
    return {t.params[at], t.state[0][at]};
  }
  __device__ void Step(Value& x, float g) const {
    x.acc += g * g;
    x.w -= learning_rate * g / (sqrtf(x.acc) + epsilon);
  }
  __device__ void Store(const DeviceTable& t, size_t at, const Value& x) const {
    t.params[at] = x.w;
    t.state[0][at] = x.acc;
  }
};

struct AdamRule {
  float learning_rate, beta1, beta2, epsilon, inv_bias1, inv_bias2;
  struct Value {
    float w, m, v;
  };
  __device__ Value Load(const DeviceTable& t, size_t at) const {
    return {t.params[at], t.state[0][at], t.state[1][at]};
  }
  __device__ void Step(Value& x, float g) const {
    x.m = beta1 * x.m + (1.0f - beta1) * g;
    x.v = beta2 * x.v + (1.0f - beta2) * g * g;
    const float m_hat = x.m * inv_bias1;
    const float v_hat = x.v * inv_bias2;
    x.w -= learning_rate * m_hat / (sqrtf(v_hat) + epsilon);
  }
  __device__ void Store(const DeviceTable& t, size_t at, const Value& x) const {
    t.params[at] = x.w;
    t.state[0][at] = x.m;
    t.state[1][at] = x.v;
  }
};

struct FtrlRule {
  float alpha, beta, l1, l2;
  struct Value {
    float w, z, n;
  };
  __device__ Value Load(const DeviceTable& t, size_t at) const {
    return {t.params[at], t.state[0][at], t.state[1][at]};
  }
  __device__ void Step(Value& x, float g) const {
    const float n_new = x.n + g * g;
    const float sqrt_n_new = sqrtf(n_new);
    const float sigma = (sqrt_n_new - sqrtf(x.n)) / alpha;
    x.z += g - sigma * x.w;
    x.n = n_new;
    if (fabsf(x.z) <= l1) {
      x.w = 0.0f;
    } else {
      x.w = -(x.z - copysignf(l1, x.z)) / ((beta + sqrt_n_new) / alpha + l2);
    }
  }
  __device__ void Store(const DeviceTable& t, size_t at, const Value& x) const {
    t.params[at] = x.w;
    t.state[0][at] = x.z;
    t.state[1][at] = x.n;
  }
};

// One set of `lanes` threads per group of entries with the same row; each
// thread owns some columns of that row and applies the group's gradients in
// order. order/starts null: entry g is group g.
template <typename Rule>
__global__ void GroupedKernel(Rule rule, DeviceTable t, const uint32_t* rows,
                              const float* grads, const uint32_t* order,
                              const uint32_t* starts, size_t groups,
                              int lane_shift, const uint64_t* guard) {
  if (Held(guard)) return;
  const uint32_t lanes = 1u << lane_shift;
  const uint32_t lane = threadIdx.x & (lanes - 1);
  const size_t per_block = blockDim.x >> lane_shift;
  for (size_t grp = blockIdx.x * per_block + (threadIdx.x >> lane_shift);
       grp < groups; grp += size_t{gridDim.x} * per_block) {
    const size_t begin = starts != nullptr ? starts[grp] : grp;
    const size_t end = starts != nullptr ? starts[grp + 1] : grp + 1;
    const size_t first = order != nullptr ? order[begin] : begin;
    const uint32_t row = rows[first];
    if (row >= t.num_rows) continue;  // CheckRows refused it already
    const size_t at = size_t{row} * t.dim;
    for (uint32_t j = lane; j < t.dim; j += lanes) {
      typename Rule::Value x = rule.Load(t, at + j);
      for (size_t k = begin; k < end; ++k) {
        const size_t i = order != nullptr ? order[k] : k;
        rule.Step(x, grads[i * t.dim + j]);
      }
      rule.Store(t, at + j, x);
    }
  }
}

template <typename Rule>
Status LaunchGrouped(const Rule& rule, const DeviceTable& t,
                     const uint32_t* rows, const float* grads,
                     const uint32_t* order, const uint32_t* starts,
                     size_t groups, void* stream, const uint64_t* guard,
                     const char* what) {
  const int shift = LaneShift(t.dim);
  ClearStaleError();
  GroupedKernel<<<GridFor(groups, shift), kThreads, 0,
                  static_cast<cudaStream_t>(stream)>>>(
      rule, t, rows, grads, order, starts, groups, shift, guard);
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
  ClearStaleError();
  if (table.dim % 4 == 0 && Aligned16(table.params) && Aligned16(grads)) {
    const int shift = LaneShift(table.dim / 4);
    AddKernel4<<<GridFor(count, shift), kThreads, 0,
                 static_cast<cudaStream_t>(stream)>>>(table, rows, grads, count,
                                                      scale, shift, guard);
    return LaunchError("device add");
  }
  const int shift = LaneShift(table.dim);
  AddKernel<<<GridFor(count, shift), kThreads, 0,
              static_cast<cudaStream_t>(stream)>>>(table, rows, grads, count,
                                                   scale, shift, guard);
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
