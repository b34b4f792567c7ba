#include "core/stream/device_staging.h"

#include <algorithm>

#include "core/device/device_memory.h"
#include "core/internal/region_state.h"
#include "net/transfer.h"

namespace ps::xfer::internal {

DeviceStaging::~DeviceStaging() {
  if (buffer_ != nullptr) memory_->FreePinned(buffer_);
}

Status DeviceStaging::Receive(int fd, const MemoryRegion& region, char* dst,
                              uint64_t length, Status* copy_failed) {
  if (buffer_ == nullptr) {
    memory_ = MemoryRegionAccess::device_memory(region);
    buffer_ = static_cast<char*>(memory_->AllocatePinned(kBufferBytes));
    if (buffer_ == nullptr) {
      return ResourceExhausted("no staging buffer for device memory");
    }
  }
  for (uint64_t done = 0; done < length;) {
    const size_t step = std::min<uint64_t>(kBufferBytes, length - done);
    PS_RETURN_IF_ERROR(net::RecvAll(fd, buffer_, step));
    if (copy_failed->ok()) {
      // Every device region of a context shares its DeviceMemory.
      *copy_failed =
          memory_->ToDevice(region.device(), dst + done, buffer_, step);
    }
    done += step;
  }
  return Status::OK();
}

Status DeviceStaging::Gather(const MemoryRegion& region,
                             std::span<const iovec> segments,
                             std::vector<char>* out) {
  size_t total = 0;
  for (const iovec& s : segments) total += s.iov_len;
  out->resize(total);
  DeviceMemory& memory = *MemoryRegionAccess::device_memory(region);
  size_t at = 0;
  for (const iovec& s : segments) {
    PS_RETURN_IF_ERROR(memory.FromDevice(region.device(), out->data() + at,
                                         s.iov_base, s.iov_len));
    at += s.iov_len;
  }
  return Status::OK();
}

}  // namespace ps::xfer::internal
