// RemoteRegion: a peer's memory region as seen from this process, made by
// Endpoint::Import from the peer's descriptor. It is tied to the endpoint that
// imported it. Copying a RemoteRegion is cheap and shares its state.
//
// Thread-safety: immutable after Import; a RemoteRegion (and its copies)
// may be named by operations on any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/memory_kind.h"

namespace ps::xfer {

class Endpoint;
namespace internal {
class RemoteRegionState;
struct RemoteRegionAccess;
}  // namespace internal

class RemoteRegion {
 public:
  RemoteRegion() = default;

  uint64_t id() const { return id_; }
  uint64_t key() const { return key_; }
  uint64_t size() const { return size_; }
  uint32_t access() const { return access_; }
  // Where the owner's bytes live (core/memory_kind.h): device memory is
  // staged by the owner's CPU unless same-host CUDA IPC or GPUDirect RDMA
  // reaches it.
  MemoryKind memory_kind() const { return memory_kind_; }
  int device() const { return device_; }
  // The owner's instance: a random number each Context draws when it starts.
  // A descriptor from an earlier instance of the peer is stale.
  uint64_t instance() const { return instance_; }
  const std::string& owner() const { return owner_; }

  // Builds a copy with another key, for tests of the target's key check.
  RemoteRegion WithKeyForTesting(uint64_t key) const;
  // Builds a copy claiming another size/access, for tests of the target's
  // bounds and access checks (the target checks its own truth).
  RemoteRegion WithSizeForTesting(uint64_t size) const;
  RemoteRegion WithAccessForTesting(uint32_t access) const;
  // A view made without a descriptor or an Endpoint, for unit tests of a
  // transport alone (tests/core/stream_transport_test.cc).
  static RemoteRegion ForTesting(uint64_t id, uint64_t key, uint64_t size,
                                 uint32_t access, uint64_t instance,
                                 std::string owner) {
    RemoteRegion r;
    r.id_ = id;
    r.key_ = key;
    r.size_ = size;
    r.access_ = access;
    r.instance_ = instance;
    r.owner_ = std::move(owner);
    return r;
  }

 private:
  friend class Endpoint;
  friend struct internal::RemoteRegionAccess;
  const Endpoint* endpoint_ = nullptr;
  uint64_t id_ = 0;
  uint64_t key_ = 0;
  uint64_t size_ = 0;
  MemoryKind memory_kind_ = MemoryKind::kHost;
  int device_ = 0;
  uint32_t access_ = 0;
  uint64_t instance_ = 0;
  std::string owner_;
  // What the endpoint's transport provider made of the region's key
  // (internal/region_state.h), shared by copies.
  std::shared_ptr<internal::RemoteRegionState> state_;
};

}  // namespace ps::xfer
