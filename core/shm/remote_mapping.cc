#include "core/shm/remote_mapping.h"

#include <sys/mman.h>

namespace ps::xfer::internal {

RemoteMapping::~RemoteMapping() {
  // A device pointer is DeviceImports' to close, with the connection.
  if (!device_export.has_value() && base != nullptr && size > 0) {
    munmap(base, size);
  }
}

}  // namespace ps::xfer::internal
