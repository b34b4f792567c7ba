// internal::RegionTable: the regions a Context has registered, and the one
// place where a remote request is checked against them: region id, key, owner
// instance, bounds and access. Thread-safe; lookups take a shared lock.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "base/status_or.h"
#include "core/memory_region.h"

namespace ps::xfer::internal {

class RegionTable {
 public:
  // `owner` names this process in error messages; `instance` is its
  // Context's instance number.
  RegionTable(std::string owner, uint64_t instance)
      : owner_(std::move(owner)), instance_(instance) {}

  void Insert(std::shared_ptr<MemoryRegion> region);
  // Removes and returns the region; kNotRegistered if absent.
  StatusOr<std::shared_ptr<MemoryRegion>> Remove(uint64_t id);

  // The region `id` if `key`, `instance`, [offset, offset+length) and
  // `access` are all allowed; otherwise the specific status, e.g.
  // "offset 4096 + 8 is past the end of region 7 (4096 bytes) on server-1".
  // `peer` names the requester in the message.
  StatusOr<std::shared_ptr<MemoryRegion>> Check(
      uint64_t id, uint64_t key, uint64_t instance, uint64_t offset,
      uint64_t length, uint32_t access, const std::string& peer) const;

  const std::string& owner() const { return owner_; }
  uint64_t instance() const { return instance_; }

  // A region over memory the caller owns (not freed with the region), for
  // unit tests of a transport alone; Insert it to make it reachable.
  static std::shared_ptr<MemoryRegion> WrapForTesting(uint64_t id, uint64_t key,
                                                      void* data, size_t size,
                                                      uint32_t access);

 private:
  const std::string owner_;
  const uint64_t instance_;
  mutable std::shared_mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<MemoryRegion>> regions_;
};

// Shared by every transport's origin-side pre-check and the target's check:
// kOutOfRange unless [offset, offset + length) lies inside `size` bytes
// (overflow-safe).
inline bool InBounds(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace ps::xfer::internal
