#include "core/shm/remote_mapping.h"

#include <sys/mman.h>

namespace ps::xfer::internal {

RemoteMapping::~RemoteMapping() {
  if (base != nullptr && size > 0) munmap(base, size);
}

}  // namespace ps::xfer::internal
