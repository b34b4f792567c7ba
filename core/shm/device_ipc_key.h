// The shm provider's key for a device region it exported over CUDA IPC
// (core/device/device_memory.h: DeviceExport), as it travels in the
// region's descriptor. Host regions the provider can map have an empty key;
// a device key is kBytes long: a magic word and version, the IPC handle,
// the offset of the region in the exported allocation, and the device's
// UUID, in this host's byte order (only same-host peers read it).
//
// Thread-safety: free functions over values.
#pragma once

#include <string>
#include <string_view>

#include "base/status_or.h"
#include "core/device/device_memory.h"

namespace ps::xfer::internal {

inline constexpr size_t kDeviceIpcKeyBytes =
    4 + 4 + DeviceExport::kHandleBytes + 8 + 16;

std::string PackDeviceIpcKey(const DeviceExport& exported);
// kInvalidArgument, saying what is wrong, for bytes PackDeviceIpcKey did
// not make (a peer's descriptor is not trusted to be well formed).
StatusOr<DeviceExport> ParseDeviceIpcKey(std::string_view key);

}  // namespace ps::xfer::internal
