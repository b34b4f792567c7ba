// MemoryKind: where a region's bytes live. Host memory is reached by the
// transports directly; device memory (an NVIDIA GPU's, through the CUDA
// driver) is staged through host memory by the target's CPU: over tcp and
// same-host connections the target's connection thread copies between the
// socket and the device (core/device/device_memory.h); verbs cannot reach it
// (no GPUDirect yet).
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
