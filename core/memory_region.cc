#include "core/memory_region.h"

#include <sys/mman.h>
#include <unistd.h>

namespace ps::xfer {

MemoryRegion::~MemoryRegion() {
  if (memfd_ >= 0) {
    if (data_ != nullptr) munmap(data_, mapped_size_);
    close(memfd_);
  }
}

}  // namespace ps::xfer
