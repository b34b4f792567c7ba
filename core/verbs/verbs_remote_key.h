// internal::VerbsRemoteKey: the verbs provider's RemoteRegionState, what an
// origin needs to address a peer's region at the peer's RDMA device: its
// address there (the rkey is the low 32 bits of the region key), or that
// the owner's CPU stages it. Immutable
// once made by VerbsProvider::Unpack; thread-safe.
#pragma once

#include <cstdint>
#include <memory>

#include "core/internal/region_state.h"

namespace ps::xfer::internal {

struct VerbsRemoteKey : RemoteRegionState {
  VerbsRemoteKey(uint64_t address, bool staged)
      : address(address), staged(staged) {}
  std::shared_ptr<RemoteRegionState> Fresh() const override {
    return std::make_shared<VerbsRemoteKey>(address, staged);
  }
  // 0: the region is not registered with the owner's device.
  const uint64_t address;
  // The owner's CPU stages the region's bytes (address is 0): device memory
  // its NIC cannot reach (VerbsTransport::Impl::RunStaged).
  const bool staged;
};

// The key of a region imported by a verbs endpoint.
inline const VerbsRemoteKey& VerbsKeyOf(const RemoteRegion& r) {
  return *static_cast<const VerbsRemoteKey*>(RemoteRegionAccess::State(r));
}

}  // namespace ps::xfer::internal
