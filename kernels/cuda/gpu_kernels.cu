// CUDA implementations of kernels/cuda/gpu_kernels.h. The device functions
// mirror the scalar reference code of kernels/quantize.cc operation for
// operation (IEEE round-to-nearest float arithmetic, no fast-math, no
// flush-to-zero), so GPU and CPU give the same bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/gpu_kernels.h"

namespace ps::kernels::gpu {
namespace {

constexpr int kThreads = 256;

Status CudaError(const char* what, cudaError_t err) {
  return Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

// Checks the launch and waits for the kernel, turning errors into Status.
Status Finish(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  return err == cudaSuccess ? Status::OK() : CudaError(what, err);
}

unsigned BlocksFor(size_t n) {
  // Grid-stride loops cover any n; cap the grid so it stays a valid size.
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<size_t>(blocks, 65535u * 8u));
}

// ---- Quantization (bit-exact ports of kernels/quantize.cc) -----------------

__device__ uint16_t FloatToFp16(float v) {
  const uint32_t bits = __float_as_uint(v);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) {
    return static_cast<uint16_t>(sign | 0x7e00 | ((abs & 0x7fffff) >> 13));
  }
  if (abs >= 0x477fe000) return sign | 0x7bff;
  if (abs >= 0x38800000) {
    const uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000) >> 13));
  }
  const float shifted = __fadd_rn(__uint_as_float(abs), 0.5f);
  return static_cast<uint16_t>(sign | (__float_as_uint(shifted) - 0x3f000000));
}

__device__ float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    const float mag = __fmul_rn(static_cast<float>(mant), 0x1p-24f);
    return __uint_as_float(sign | __float_as_uint(mag));
  }
  if (exp == 31) {
    const uint32_t quiet = mant != 0 ? 0x400000 : 0;
    return __uint_as_float(sign | 0x7f800000 | quiet | (mant << 13));
  }
  return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
}

__device__ uint16_t FloatToBf16(float v) {
  const uint32_t bits = __float_as_uint(v);
  const uint32_t abs = bits & 0x7fffffff;
  const uint32_t sign = bits & 0x80000000;
  if (abs > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
  if (abs > 0x7f7f0000) return static_cast<uint16_t>((sign >> 16) | 0x7f7f);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

__device__ float Bf16ToFloat(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

__device__ float Int8ScaleFor(float max_abs) {
  if (isnan(max_abs) || isinf(max_abs)) return __int_as_float(0x7fc00000);
  if (!(max_abs > 0.0f)) return 0.0f;
  float scale = __fdiv_rn(max_abs, 127.0f);
  for (int i = 0; i < 64; ++i) {
    const float top = __fmul_rn(127.0f, scale);
    if (isfinite(top) && __fdiv_rn(top, 127.0f) == scale) return scale;
    scale = nextafterf(scale, __int_as_float(0x7f800000));
  }
  return __fdiv_rn(max_abs, 127.0f);
}

__global__ void QuantizeFp16Kernel(const float* in, size_t n, uint16_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = FloatToFp16(in[i]);
  }
}
__global__ void DequantizeFp16Kernel(const uint16_t* in, size_t n, float* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = Fp16ToFloat(in[i]);
  }
}
__global__ void QuantizeBf16Kernel(const float* in, size_t n, uint16_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = FloatToBf16(in[i]);
  }
}
__global__ void DequantizeBf16Kernel(const uint16_t* in, size_t n, float* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = Bf16ToFloat(in[i]);
  }
}

// One warp per int8 block: reduce max |v| and finiteness over the block,
// lane 0 picks the scale, then all lanes quantize.
__global__ void QuantizeInt8Kernel(const float* in, size_t n, size_t block,
                                   size_t num_blocks, int8_t* out,
                                   float* scales) {
  const unsigned lane = threadIdx.x % 32;
  const size_t warps_per_grid = size_t{gridDim.x} * (blockDim.x / 32);
  for (size_t b = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) / 32;
       b < num_blocks; b += warps_per_grid) {
    const size_t start = b * block;
    const size_t len = block < n - start ? block : n - start;
    float max_abs = 0.0f;
    bool finite = true;
    for (size_t i = lane; i < len; i += 32) {
      const float a = fabsf(in[start + i]);
      finite &= isfinite(a);
      max_abs = a > max_abs ? a : max_abs;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, max_abs, offset);
      max_abs = other > max_abs ? other : max_abs;
    }
    finite = __all_sync(0xffffffffu, finite);
    float scale = 0.0f;
    if (lane == 0) {
      scale = finite ? Int8ScaleFor(max_abs) : __int_as_float(0x7fc00000);
      scales[b] = scale;
    }
    scale = __shfl_sync(0xffffffffu, scale, 0);
    if (!(scale > 0.0f)) {
      for (size_t i = lane; i < len; i += 32) out[start + i] = 0;
      continue;
    }
    const float inv = __fdiv_rn(1.0f, scale);
    for (size_t i = lane; i < len; i += 32) {
      float q = rintf(__fmul_rn(in[start + i], inv));
      q = fminf(fmaxf(q, -127.0f), 127.0f);
      out[start + i] = static_cast<int8_t>(q);
    }
  }
}

__global__ void DequantizeInt8Kernel(const int8_t* in, size_t n, size_t block,
                                     const float* scales, float* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = __fmul_rn(static_cast<float>(in[i]), scales[i / block]);
  }
}

// ---- Threshold detection -------------------------------------------------
//
// Two passes keep the output in increasing index order without a sort:
// count the hits per tile, scan the counts (on the host: one number per
// 2048 gradients), then each tile writes its hits at its offset, in order,
// using warp ballots.

constexpr int kTileRounds = 8;
constexpr size_t kTile = size_t{kThreads} * kTileRounds;

__device__ bool Passes(float g, float threshold) {
  return fabsf(g) >= threshold;
}

__global__ void CountTileHits(const float* grad, size_t n, float threshold,
                              uint32_t* tile_counts) {
  const size_t tile = blockIdx.x;
  const size_t start = tile * kTile;
  int hits = 0;
  for (int r = 0; r < kTileRounds; ++r) {
    const size_t i = start + static_cast<size_t>(r) * kThreads + threadIdx.x;
    hits += (i < n && Passes(grad[i], threshold)) ? 1 : 0;
  }
  __shared__ int warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    hits += __shfl_xor_sync(0xffffffffu, hits, offset);
  }
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = hits;
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    tile_counts[tile] = static_cast<uint32_t>(total);
  }
}

__global__ void WriteTileHits(const float* grad, size_t n, float threshold,
                              const uint64_t* tile_offsets, uint32_t* indices,
                              float* values) {
  const size_t tile = blockIdx.x;
  const size_t start = tile * kTile;
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  __shared__ uint32_t warp_hits[kThreads / 32];
  uint64_t base = tile_offsets[tile];
  for (int r = 0; r < kTileRounds; ++r) {
    const size_t i = start + static_cast<size_t>(r) * kThreads + threadIdx.x;
    const float g = i < n ? grad[i] : 0.0f;
    const bool hit = i < n && Passes(g, threshold);
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_hits[warp] = __popc(ballot);
    __syncthreads();
    uint64_t offset = base;
    uint32_t round_total = 0;
    for (unsigned w = 0; w < kThreads / 32; ++w) {
      if (w < warp) offset += warp_hits[w];
      round_total += warp_hits[w];
    }
    if (hit) {
      offset += __popc(ballot & ((1u << lane) - 1));
      indices[offset] = static_cast<uint32_t>(i);
      values[offset] = g;
    }
    base += round_total;
    __syncthreads();  // warp_hits is rewritten next round
  }
}

// ---- Sparse accumulation --------------------------------------------------

__global__ void FindBadRow(const uint32_t* rows, size_t count,
                           uint64_t num_rows, unsigned long long* first_bad) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    if (rows[i] >= num_rows) atomicMin(first_bad, i);
  }
}

__global__ void AccumulateKernel(const uint32_t* rows, size_t count,
                                 const float* values, float* table,
                                 uint32_t dim) {
  const size_t total = count * dim;
  for (size_t k = blockIdx.x * size_t{blockDim.x} + threadIdx.x; k < total;
       k += size_t{gridDim.x} * blockDim.x) {
    const size_t i = k / dim;
    const size_t j = k - i * dim;
    atomicAdd(table + size_t{rows[i]} * dim + j, values[k]);
  }
}

}  // namespace

Status DeviceAvailable() {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) {
    return NotSupported(std::string("cudaGetDeviceCount: ") +
                        cudaGetErrorString(err));
  }
  if (devices == 0) return NotSupported("cudaGetDeviceCount: 0 devices");
  return Status::OK();
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  void* data = nullptr;
  if (bytes > 0) {
    const cudaError_t err = cudaMalloc(&data, bytes);
    if (err != cudaSuccess) {
      return CudaError(
          ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str(), err);
    }
  }
  return DeviceBuffer(data, bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

Status DeviceBuffer::CopyFromHost(const void* host, size_t bytes) {
  if (bytes > size_) {
    return OutOfRange("copy of " + std::to_string(bytes) +
                      " bytes into a device buffer of " +
                      std::to_string(size_));
  }
  if (bytes == 0) return Status::OK();
  const cudaError_t err =
      cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice);
  return err == cudaSuccess ? Status::OK() : CudaError("cudaMemcpy H2D", err);
}

Status DeviceBuffer::CopyToHost(void* host, size_t bytes) const {
  if (bytes > size_) {
    return OutOfRange("copy of " + std::to_string(bytes) +
                      " bytes out of a device buffer of " +
                      std::to_string(size_));
  }
  if (bytes == 0) return Status::OK();
  const cudaError_t err =
      cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost);
  return err == cudaSuccess ? Status::OK() : CudaError("cudaMemcpy D2H", err);
}

Status DetectThreshold(const float* grad, size_t n, float threshold,
                       uint32_t* indices, float* values, size_t capacity,
                       size_t* count) {
  *count = 0;
  if (n > (uint64_t{1} << 32)) {
    return InvalidArgument("threshold detection: " + std::to_string(n) +
                           " gradients exceed the 2^32 a uint32 index holds");
  }
  if (n == 0) return Status::OK();
  const size_t tiles = (n + kTile - 1) / kTile;
  PS_ASSIGN_OR_RETURN(DeviceBuffer counts,
                      DeviceBuffer::Allocate(tiles * sizeof(uint32_t)));
  CountTileHits<<<static_cast<unsigned>(tiles), kThreads>>>(
      grad, n, threshold, counts.as<uint32_t>());
  PS_RETURN_IF_ERROR(Finish("threshold detection (count)"));
  std::vector<uint32_t> host_counts(tiles);
  PS_RETURN_IF_ERROR(
      counts.CopyToHost(host_counts.data(), tiles * sizeof(uint32_t)));
  std::vector<uint64_t> offsets(tiles);
  uint64_t total = 0;
  for (size_t t = 0; t < tiles; ++t) {
    offsets[t] = total;
    total += host_counts[t];
  }
  *count = total;
  if (total > capacity) {
    return OutOfRange("threshold detection: " + std::to_string(total) +
                      " gradients pass, output holds " +
                      std::to_string(capacity));
  }
  if (total == 0) return Status::OK();
  PS_ASSIGN_OR_RETURN(DeviceBuffer device_offsets,
                      DeviceBuffer::Allocate(tiles * sizeof(uint64_t)));
  PS_RETURN_IF_ERROR(
      device_offsets.CopyFromHost(offsets.data(), tiles * sizeof(uint64_t)));
  WriteTileHits<<<static_cast<unsigned>(tiles), kThreads>>>(
      grad, n, threshold, device_offsets.as<uint64_t>(), indices, values);
  return Finish("threshold detection (write)");
}

Status QuantizeFp16(const float* in, size_t n, uint16_t* out) {
  if (n == 0) return Status::OK();
  QuantizeFp16Kernel<<<BlocksFor(n), kThreads>>>(in, n, out);
  return Finish("fp16 quantize");
}
Status DequantizeFp16(const uint16_t* in, size_t n, float* out) {
  if (n == 0) return Status::OK();
  DequantizeFp16Kernel<<<BlocksFor(n), kThreads>>>(in, n, out);
  return Finish("fp16 dequantize");
}
Status QuantizeBf16(const float* in, size_t n, uint16_t* out) {
  if (n == 0) return Status::OK();
  QuantizeBf16Kernel<<<BlocksFor(n), kThreads>>>(in, n, out);
  return Finish("bf16 quantize");
}
Status DequantizeBf16(const uint16_t* in, size_t n, float* out) {
  if (n == 0) return Status::OK();
  DequantizeBf16Kernel<<<BlocksFor(n), kThreads>>>(in, n, out);
  return Finish("bf16 dequantize");
}

Status QuantizeInt8(const float* in, size_t n, size_t block, int8_t* out,
                    float* scales) {
  if (block == 0) return InvalidArgument("int8 quantize: block size 0");
  if (n == 0) return Status::OK();
  const size_t num_blocks = (n + block - 1) / block;
  const size_t warps_per_cuda_block = kThreads / 32;
  const unsigned grid = static_cast<unsigned>(std::min<size_t>(
      (num_blocks + warps_per_cuda_block - 1) / warps_per_cuda_block,
      65535u * 8u));
  QuantizeInt8Kernel<<<grid, kThreads>>>(in, n, block, num_blocks, out, scales);
  return Finish("int8 quantize");
}

Status DequantizeInt8(const int8_t* in, size_t n, size_t block,
                      const float* scales, float* out) {
  if (block == 0) return InvalidArgument("int8 dequantize: block size 0");
  if (n == 0) return Status::OK();
  DequantizeInt8Kernel<<<BlocksFor(n), kThreads>>>(in, n, block, scales, out);
  return Finish("int8 dequantize");
}

Status AccumulateRows(const uint32_t* rows, size_t count, const float* values,
                      float* table, uint64_t num_rows, uint32_t dim) {
  if (count == 0) return Status::OK();
  if (dim == 0) return InvalidArgument("gpu accumulate: dim 0");
  PS_ASSIGN_OR_RETURN(DeviceBuffer first_bad,
                      DeviceBuffer::Allocate(sizeof(unsigned long long)));
  const unsigned long long none = ~0ull;
  PS_RETURN_IF_ERROR(first_bad.CopyFromHost(&none, sizeof(none)));
  FindBadRow<<<BlocksFor(count), kThreads>>>(
      rows, count, num_rows, first_bad.as<unsigned long long>());
  PS_RETURN_IF_ERROR(Finish("gpu accumulate (bounds)"));
  unsigned long long bad = none;
  PS_RETURN_IF_ERROR(first_bad.CopyToHost(&bad, sizeof(bad)));
  if (bad != none) {
    uint32_t row = 0;
    const cudaError_t err =
        cudaMemcpy(&row, rows + bad, sizeof(row), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) return CudaError("cudaMemcpy D2H", err);
    return OutOfRange("gpu accumulate: index " + std::to_string(bad) +
                      " is row " + std::to_string(row) +
                      ", past the end of a table of " +
                      std::to_string(num_rows) + " rows");
  }
  AccumulateKernel<<<BlocksFor(count * dim), kThreads>>>(rows, count, values,
                                                         table, dim);
  return Finish("gpu accumulate");
}

}  // namespace ps::kernels::gpu
