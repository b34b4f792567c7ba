#include "core/memory_region.h"

#include <sys/mman.h>
#include <unistd.h>

namespace ps::xfer {

MemoryRegion::~MemoryRegion() {
  if (memfd_ >= 0) {
    if (data_ != nullptr) munmap(data_, mapped_size_);
    close(memfd_);
  }
  if (peer_memfd_ >= 0) close(peer_memfd_);
}

}  // namespace ps::xfer
