#include "core/remote_region.h"

#include "core/internal/region_state.h"

namespace ps::xfer {

// Test copies get a fresh state (e.g. unmapped) so the owner checks their
// claims again instead of reusing what was learned with the true key.
RemoteRegion RemoteRegion::WithKeyForTesting(uint64_t key) const {
  RemoteRegion r = *this;
  r.key_ = key;
  if (state_ != nullptr) r.state_ = state_->Fresh();
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
