// internal::DeviceMemory: what the transfer core needs of an accelerator's
// memory: allocate and free it, copy between it and host memory, tell a
// device pointer from a host one, and page-locked host buffers to stage
// copies through. One per Context, shared by its device regions (each keeps
// it alive) and the connection threads that copy into them.
//
// The CUDA implementation (cuda_device_memory.cc) loads the CUDA driver
// (libcuda.so.1) with dlopen on first use, so the core links nothing of CUDA
// and runs unchanged where there is no GPU: every call then fails with
// kNotSupported naming why ("libcuda.so.1: cannot open shared object file").
// Builds without the CUDA headers, and sanitizer builds (the CUDA libraries
// are not instrumented), use no_device_memory.cc, where every call says the
// build has no CUDA support. Copies run on the device's primary context,
// which the CUDA runtime also uses, so memory from cudaMalloc is reachable.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <memory>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::xfer::internal {

class DeviceMemory {
 public:
  static std::shared_ptr<DeviceMemory> Create();
  virtual ~DeviceMemory() = default;

  // OK when `device` (an ordinal, 0 ..) can be used; else kNotSupported or
  // kInvalidArgument saying why.
  virtual Status Usable(int device) = 0;
  virtual StatusOr<void*> Allocate(int device, size_t bytes) = 0;
  virtual void Free(int device, void* p) = 0;
  virtual Status Zero(int device, void* device_dst, size_t n) = 0;
  // Synchronous copies; `n` bytes.
  virtual Status ToDevice(int device, void* device_dst, const void* host_src,
                          size_t n) = 0;
  virtual Status FromDevice(int device, void* host_dst, const void* device_src,
                            size_t n) = 0;
  // The ordinal of the device whose memory `p` is, or -1 (host memory, or
  // no driver). Costs a driver call: not for every host operation.
  virtual int DeviceOf(const void* p) = 0;
  // Page-locked host memory (plain memory where that cannot be had), which
  // the device copies from and to at full speed.
  virtual void* AllocatePinned(size_t bytes) = 0;
  virtual void FreePinned(void* p) = 0;
};

}  // namespace ps::xfer::internal
