// HostPageLock in a build without CUDA (table/host_page_lock.h): nothing
// can be locked for a device that this build cannot reach.
#include "table/host_page_lock.h"

namespace ps::table {

StatusOr<std::unique_ptr<HostPageLock>> HostPageLock::Create(void*, size_t) {
  return NotSupported(
      "page-locking host memory: built without CUDA (nvcc was not found at "
      "configure time, or this is a sanitizer build)");
}

HostPageLock::~HostPageLock() = default;

}  // namespace ps::table
