// internal::RemoteMapping: a same-host peer's region mapped into this
// process: the shm provider's RemoteRegionState. Made empty by
// ShmProvider::Unpack (at Endpoint::Import) and filled by the shm transport
// on first use (one round trip to the owner, which checks the key and hands
// over the memfd); shared by every copy of the RemoteRegion. Mapped PROT_READ
// only when the region does not let peers write (its memfd, read-only and
// sealed against writes, would refuse more anyway).
//
// A device region the owner exported over CUDA IPC (device_ipc_key.h) is
// "mapped" the same way, with the same round trip for the owner's truth,
// but `base` is then a device pointer of this process (the export opened by
// DeviceImports) that only DeviceMemory::Copy may touch, never the CPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

#include "core/device/device_memory.h"
#include "core/internal/region_state.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

struct RemoteMapping : RemoteRegionState {
  explicit RemoteMapping(bool mappable,
                         std::optional<DeviceExport> device_export = {})
      : mappable(mappable), device_export(device_export) {}
  ~RemoteMapping() override;
  std::shared_ptr<RemoteRegionState> Fresh() const override {
    return std::make_shared<RemoteMapping>(mappable, device_export);
  }

  // The owner allocated the region (memfd-backed): it can be mapped. The
  // others are reached through the stream transport, except device memory
  // the owner exported (device_export, below).
  const bool mappable;

  std::mutex mu;  // serializes the first mapping
  std::atomic<bool> ready{false};
  // Valid once ready: the owner's truth, not the descriptor's claims.
  uint8_t* base = nullptr;
  size_t size = 0;
  uint32_t access = 0;
  uint32_t slot = 0;  // the region's word in the owner's liveness page

  // Device memory the owner exported over CUDA IPC, reached with device
  // copies while `device_refused` is false. Set when the export could not
  // be opened here (then the region is streamed from then on). After the
  // fields above, which Resolve reads on every host operation: the 96-byte
  // export ahead of them would push them into other cache lines.
  const std::optional<DeviceExport> device_export;
  std::atomic<bool> device_refused{false};
  int device = -1;  // valid once ready: this process's ordinal for `base`

  // Test seam: set before the first use to keep the descriptor the owner
  // sent in owner_fd (the transport closes it once mapped otherwise), so a
  // test can try what a hostile peer would do with it. Off in production:
  // a descriptor per mapped region would count against the fd limit.
  bool keep_owner_fd = false;
  net::UniqueFd owner_fd;
};

// The mapping state of a region imported by a shm endpoint.
inline RemoteMapping* MappingOf(const RemoteRegion& r) {
  return static_cast<RemoteMapping*>(RemoteRegionAccess::State(r));
}

}  // namespace ps::xfer::internal
