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
// Same-host peers reach an allocation without this process's CPU through
// CUDA IPC: Export names it (an opaque handle, valid in other processes of
// this host), Open maps it into the importing process, Close unmaps it, and
// Copy moves bytes between host memory, device memory and opened memory in
// any direction. The exporter must keep the allocation until every importer
// closed it (CUDA leaves freeing it earlier undefined): core/shm/ says how
// the shm transport guarantees that.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::xfer::internal {

// A device allocation as another process on this host opens it: the CUDA
// IPC handle of the whole allocation, where in it the exported bytes start,
// and the device that holds it (its UUID: ordinals differ between processes
// that see different devices).
struct DeviceExport {
  static constexpr size_t kHandleBytes = 64;  // CU_IPC_HANDLE_SIZE
  std::array<uint8_t, kHandleBytes> handle{};
  uint64_t offset = 0;
  std::array<uint8_t, 16> device_uuid{};
};

// An export opened in this process (DeviceMemory::Open): `base` is the
// allocation's start here, a device pointer valid on `device` (an ordinal
// of this process) until Close, for `bytes` (the driver's word for the
// allocation's size, not the exporter's: bounds against a hostile offset).
struct OpenedExport {
  int device = -1;
  void* base = nullptr;
  size_t bytes = 0;
};

// One piece of a DeviceMemory::Copy: `n` bytes from `src` to `dst`.
struct CopyPiece {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t n = 0;
};

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

  // CUDA IPC. Export: the handle of the allocation that holds `p` (memory
  // from Allocate; pool and virtual-memory allocations cannot be exported,
  // kNotSupported) and `p`'s offset in it, which must hold `bytes` more.
  virtual StatusOr<DeviceExport> Export(int device, const void* p,
                                        size_t bytes) = 0;
  // Opens another process's export on the device of this process with the
  // same UUID (else on device 0, with peer access enabled on demand). Fails
  // in the exporting process itself, across containers that do not share
  // the GPU, and without a driver: the caller then stages instead.
  virtual StatusOr<OpenedExport> Open(const DeviceExport& exported) = 0;
  // Unmaps what Open returned; every copy from or to it must have ended.
  virtual void Close(const OpenedExport& opened) = 0;
  // Synchronous copies in any direction between host memory and device
  // memory of `device` (Allocate's or opened), all `pieces`: on return the
  // bytes are in their destinations, visible to the host and to the
  // device's later work whichever process or stream runs it.
  virtual Status Copy(int device, std::span<const CopyPiece> pieces) = 0;
};

}  // namespace ps::xfer::internal
