// internal::RemoteMapping: a same-host peer's region mapped into this
// process. Made empty by Endpoint::Import and filled by the shm transport on
// first use (one round trip to the owner, which checks the key and hands over
// the memfd); shared by every copy of the RemoteRegion. Mapped PROT_READ
// only when the region does not let peers write (its memfd, read-only and
// sealed against writes, would refuse more anyway).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "net/unique_fd.h"

namespace ps::xfer::internal {

struct RemoteMapping {
  ~RemoteMapping();

  std::mutex mu;  // serializes the first mapping
  std::atomic<bool> ready{false};
  // Valid once ready: the owner's truth, not the descriptor's claims.
  uint8_t* base = nullptr;
  size_t size = 0;
  uint32_t access = 0;
  uint32_t slot = 0;  // the region's word in the owner's liveness page

  // Test seam: set before the first use to keep the descriptor the owner
  // sent in owner_fd (the transport closes it once mapped otherwise), so a
  // test can try what a hostile peer would do with it. Off in production:
  // a descriptor per mapped region would count against the fd limit.
  bool keep_owner_fd = false;
  net::UniqueFd owner_fd;
};

}  // namespace ps::xfer::internal

#include "core/remote_region.h"

namespace ps::xfer::internal {

// Lets transports reach a RemoteRegion's per-transport state.
struct RemoteRegionAccess {
  static RemoteMapping* Mapping(const RemoteRegion& r) {
    return r.mapping_.get();
  }
  // Verbs: the region's address at the owner's device (0: not registered).
  static uint64_t VerbsAddress(const RemoteRegion& r) {
    return r.verbs_address_;
  }
};

}  // namespace ps::xfer::internal
