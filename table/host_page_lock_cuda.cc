// HostPageLock with CUDA (table/host_page_lock.h).
#include <cuda_runtime_api.h>

#include <string>

#include "table/host_page_lock.h"

namespace ps::table {

StatusOr<std::unique_ptr<HostPageLock>> HostPageLock::Create(void* data,
                                                             size_t bytes) {
  const cudaError_t err =
      cudaHostRegister(data, bytes, cudaHostRegisterDefault);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: the caller goes on pageable
    const std::string why = cudaGetErrorString(err);
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
      return NotSupported("cannot page-lock host memory: " + why);
    }
    return Internal("cudaHostRegister of " + std::to_string(bytes) +
                    " bytes: " + why);
  }
  return std::unique_ptr<HostPageLock>(new HostPageLock(data));
}

HostPageLock::~HostPageLock() { cudaHostUnregister(data_); }

}  // namespace ps::table
