#include "core/memory_region.h"

#include <sys/mman.h>
#include <unistd.h>

#include "core/device/device_memory.h"
#include "core/internal/region_state.h"

namespace ps::xfer {

MemoryRegion::MemoryRegion() = default;

MemoryRegion::~MemoryRegion() {
  transport_states_.clear();  // withdrawn before the memory goes
  if (memfd_ >= 0) {
    if (data_ != nullptr) munmap(data_, mapped_size_);
    close(memfd_);
  }
  if (peer_memfd_ >= 0) close(peer_memfd_);
  if (owns_device_memory_) device_memory_->Free(device_, data_);
}

}  // namespace ps::xfer
