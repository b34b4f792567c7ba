#include "core/remote_region.h"

#include "core/shm/remote_mapping.h"

namespace ps::xfer {

// Test copies get a fresh (unmapped) state so the owner checks their claims
// again instead of reusing a mapping made with the true key.
RemoteRegion RemoteRegion::WithKeyForTesting(uint64_t key) const {
  RemoteRegion r = *this;
  r.key_ = key;
  r.mapping_ = std::make_shared<internal::RemoteMapping>();
  return r;
}

RemoteRegion RemoteRegion::WithSizeForTesting(uint64_t size) const {
  RemoteRegion r = *this;
  r.size_ = size;
  return r;
}

RemoteRegion RemoteRegion::WithAccessForTesting(uint32_t access) const {
  RemoteRegion r = *this;
  r.access_ = access;
  return r;
}

}  // namespace ps::xfer
