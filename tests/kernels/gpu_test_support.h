// What the GPU kernel tests share: skipping, with the reason, where no CUDA
// device is usable, and moving test vectors to and from device memory
// (kernels/cuda/gpu_kernels.h). Only for tests built with ps_kernels_cuda.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cuda/gpu_kernels.h"

// In a test body: skips it when no CUDA device can be used, saying why.
#define SKIP_WITHOUT_GPU()                                                \
  do {                                                                    \
    const ::ps::Status available = ::ps::kernels::gpu::DeviceAvailable(); \
    if (!available.ok()) {                                                \
      GTEST_SKIP() << "no usable CUDA device: " << available.ToString();  \
    }                                                                     \
  } while (0)

namespace ps::kernels::gpu::testing {

// A device copy of `host` (at least one element's room).
template <typename T>
DeviceBuffer Upload(const std::vector<T>& host) {
  auto buffer =
      DeviceBuffer::Allocate(std::max<size_t>(1, host.size()) * sizeof(T));
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_TRUE(buffer->CopyFromHost(host.data(), host.size() * sizeof(T)).ok());
  return std::move(buffer).value();
}

// Device room for n values of T (at least one).
template <typename T>
DeviceBuffer Scratch(size_t n) {
  auto buffer = DeviceBuffer::Allocate(std::max<size_t>(1, n) * sizeof(T));
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return std::move(buffer).value();
}

// The first n values of T in `buffer`.
template <typename T>
std::vector<T> Download(const DeviceBuffer& buffer, size_t n) {
  std::vector<T> host(n);
  EXPECT_TRUE(buffer.CopyToHost(host.data(), n * sizeof(T)).ok());
  return host;
}

}  // namespace ps::kernels::gpu::testing
