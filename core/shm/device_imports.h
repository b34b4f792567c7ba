// internal::DeviceImports: the device regions of one same-host peer that a
// ShmTransport reaches over CUDA IPC, each opened once per connection (on
// first use) and all closed when the connection's transport is destroyed.
// Closing only then is what lets the owner free safely: the owner keeps an
// exported allocation until the connection that opened it is gone
// (shm_provider.cc), and this side closes its handles before its socket
// (the transport's destructor runs before the stream's), so a handle is
// never open here while the owner frees the memory under it. A region
// deregistered meanwhile is refused by the liveness word, not by closing.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "base/status_or.h"
#include "core/device/device_memory.h"

namespace ps::xfer::internal {

class DeviceImports {
 public:
  explicit DeviceImports(std::shared_ptr<DeviceMemory> memory)
      : memory_(std::move(memory)) {}
  ~DeviceImports();
  DeviceImports(const DeviceImports&) = delete;
  DeviceImports& operator=(const DeviceImports&) = delete;

  // `exported` (the region `region_id` with `key`) opened in this process;
  // the same for every later call with that region.
  StatusOr<OpenedExport> Open(uint64_t region_id, uint64_t key,
                              const DeviceExport& exported);
  DeviceMemory& memory() const { return *memory_; }

 private:
  const std::shared_ptr<DeviceMemory> memory_;
  std::mutex mu_;
  // By (region id, key).
  std::map<std::pair<uint64_t, uint64_t>, OpenedExport> opened_;  // mu_
};

}  // namespace ps::xfer::internal
