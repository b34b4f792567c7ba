// The sparse-gradient kernels on an NVIDIA GPU: threshold detection,
// quantization (fp16, bf16, int8 with block scales) and atomic sparse
// accumulation, with the same results as the CPU kernels in kernels/:
//   - detection gives the indices with |g| >= threshold in increasing order
//     and their values, like the CPU threshold detector;
//   - quantization rounds bit for bit like kernels/quantize.h (same
//     saturation, NaN handling and int8 scale choice);
//   - accumulation adds rows with atomicAdd; the sum equals the CPU one up to
//     float rounding order, and a bad row index is OutOfRange with the table
//     untouched, as in kernels/sparse_accumulate.h.
//
// This header needs no CUDA headers: pointers are plain, and every function
// returns a Status (NotSupported when there is no usable device, Internal
// naming the CUDA error otherwise). Built only when CMake found nvcc (target
// ps_kernels_cuda, compiled for sm_90 with compute_90 PTX for newer GPUs).
//
// All "device" pointers point into device memory (DeviceBuffer). Functions run
// on the default stream and return after the device has finished, so results
// can be copied back at once. That keeps the first version simple; a stream
// argument is the natural next step when a server overlaps copies and work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::kernels::gpu {

// OK when a CUDA device can be used; otherwise NotSupported with the reason
// ("cudaGetDeviceCount: no CUDA-capable device is detected").
Status DeviceAvailable();

// Device memory, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  static StatusOr<DeviceBuffer> Allocate(size_t bytes);
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

  // Copies `bytes` from host memory to the start of the buffer, or back.
  // OutOfRange if bytes > size().
  Status CopyFromHost(const void* host, size_t bytes);
  Status CopyToHost(void* host, size_t bytes) const;

 private:
  DeviceBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Threshold detection: writes the indices i with |grad[i]| >= threshold, in
// increasing order, to indices[0..count) and grad[i] to values[0..count),
// and the count to *count (host memory). `capacity` is the room in indices
// and values; if more pass, *count says how many and the result is
// OutOfRange with nothing written. n must be <= 2^32 (uint32 indices):
// InvalidArgument beyond. NaN never passes (as on the CPU: the comparison
// is false).
Status DetectThreshold(const float* grad, size_t n, float threshold,
                       uint32_t* indices, float* values, size_t capacity,
                       size_t* count);

// Quantization, as kernels/quantize.h, on device arrays.
Status QuantizeFp16(const float* in, size_t n, uint16_t* out);
Status DequantizeFp16(const uint16_t* in, size_t n, float* out);
Status QuantizeBf16(const float* in, size_t n, uint16_t* out);
Status DequantizeBf16(const uint16_t* in, size_t n, float* out);
// `scales` holds Int8BlockCount(n, block) floats; block >= 1.
Status QuantizeInt8(const float* in, size_t n, size_t block, int8_t* out,
                    float* scales);
Status DequantizeInt8(const int8_t* in, size_t n, size_t block,
                      const float* scales, float* out);

// table[rows[i] * dim + j] += values[i * dim + j] with atomicAdd, for i <
// count and j < dim. Concurrent calls (other streams, other host threads)
// may add into the same table. Every row index is checked against num_rows
// before anything is written: OutOfRange names the first bad one.
Status AccumulateRows(const uint32_t* rows, size_t count, const float* values,
                      float* table, uint64_t num_rows, uint32_t dim);

}  // namespace ps::kernels::gpu
