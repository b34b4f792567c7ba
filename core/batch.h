// Batch: several operations to one peer posted together with
// Endpoint::Post(batch), e.g. the rows of one pull spread over two regions.
// The RemoteRegions and local buffers named must stay valid until the posted
// request completes.
//
// Thread-safety: a plain value type, used by one thread at a time. Like the
// regions and buffers it names, leave it unchanged until the request that
// posted it completes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/internal/op.h"

namespace ps::xfer {

class Batch {
 public:
  void Put(const void* src, size_t length, const RemoteRegion& dst,
           uint64_t offset);
  void Get(void* dst, size_t length, const RemoteRegion& src, uint64_t offset);
  void FetchAdd64(const RemoteRegion& dst, uint64_t offset, uint64_t value,
                  uint64_t* previous);

  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  void Clear() { ops_.clear(); }
  const std::vector<internal::Op>& ops() const { return ops_; }

 private:
  std::vector<internal::Op> ops_;
};

}  // namespace ps::xfer
