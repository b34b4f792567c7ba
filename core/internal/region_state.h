// What transport providers keep per region, opaque to the regions that hold
// it: LocalRegionState in a MemoryRegion (from registration to Deregister),
// RemoteRegionState in a RemoteRegion (made by Import, shared by copies).
// MemoryRegionAccess and RemoteRegionAccess let providers and the Context
// reach the regions' internals without the public headers naming them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "core/memory_region.h"
#include "core/remote_region.h"

namespace ps::xfer::internal {

class DeviceMemory;

// One provider's part of one local region. Withdraw is thread-safe and
// idempotent; the destructor withdraws if Deregister did not.
class LocalRegionState {
 public:
  virtual ~LocalRegionState() = default;
  // The region key's low 32 bits, when this provider fixes them: a device
  // that checks its own key (the verbs rkey) then refuses a wrong region key.
  virtual std::optional<uint32_t> FixedKeyBits() const { return std::nullopt; }
  // Once the key is final: makes the region reachable for this provider's
  // peers and returns its key for the descriptor (nullopt: none to send).
  virtual StatusOr<std::optional<std::string>> Publish(uint64_t key) = 0;
  // This provider's peers can no longer reach the region (Deregister).
  virtual void Withdraw() = 0;
};

// One provider's view of one imported region.
class RemoteRegionState {
 public:
  virtual ~RemoteRegionState() = default;
  // The state as Import made it, without what was learned since: test copies
  // with other claims (RemoteRegion::With*ForTesting) are checked anew.
  virtual std::shared_ptr<RemoteRegionState> Fresh() const = 0;
};

struct MemoryRegionAccess {
  static size_t mapped_size(const MemoryRegion& r) { return r.mapped_size_; }
  static int peer_memfd(const MemoryRegion& r) { return r.peer_memfd(); }
  // The driver of a device region's memory (null for host memory).
  static const std::shared_ptr<DeviceMemory>& device_memory(
      const MemoryRegion& r) {
    return r.device_memory_;
  }
  // Context::AllocateDevice's memory, which the region frees when it goes
  // (RegisterDevice's is the application's).
  static bool owns_device_memory(const MemoryRegion& r) {
    return r.owns_device_memory_;
  }
  static const std::vector<std::unique_ptr<LocalRegionState>>& States(
      const MemoryRegion& r) {
    return r.transport_states_;
  }
  // The first state of type T (a provider finds its own), or null.
  template <typename T>
  static T* Find(const MemoryRegion& r) {
    for (const auto& s : r.transport_states_) {
      if (auto* t = dynamic_cast<T*>(s.get())) return t;
    }
    return nullptr;
  }
};

struct RemoteRegionAccess {
  // The endpoint's provider's state (null for RemoteRegion::ForTesting).
  static RemoteRegionState* State(const RemoteRegion& r) {
    return r.state_.get();
  }
};

}  // namespace ps::xfer::internal
