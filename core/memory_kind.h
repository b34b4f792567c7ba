// MemoryKind: where a region's bytes live. Host memory is reached by the
// transports directly. Device memory (an NVIDIA GPU's, through the CUDA
// driver, core/device/device_memory.h): same-host peers open memory from
// Context::AllocateDevice over CUDA IPC and copy with the device, one-sided
// (core/shm/shm_transport.h); elsewhere, and where IPC is not possible,
// the target's connection thread stages the bytes through page-locked host
// memory (over tcp and same-host connections); verbs reaches it with
// GPUDirect RDMA where the target's NIC can register it (nvidia-peermem),
// and otherwise through the target's CPU as well, via a registered staging
// buffer (core/verbs/verbs_target.h): slower, each operation complete on
// return.
//
// Thread-safety: an enum and pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace ps::xfer {

enum class MemoryKind : uint8_t {
  kHost = 0,
  kCudaDevice = 1,
};

// "host", "cuda".
std::string_view MemoryKindName(MemoryKind kind);

}  // namespace ps::xfer
