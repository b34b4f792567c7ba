// DevicePush for builds without ps_kernels_cuda (device_push.h): nvcc was
// not found when the build was configured, or it is a sanitizer build (the
// CUDA runtime is not instrumented). The API is the same; once the
// arguments pass the shared checks, every push says why it cannot run.
#include "client/device_push.h"

namespace ps::worker {
namespace {

Status NoCuda() {
  return NotSupported(
      "push from device memory: this build has no CUDA support (nvcc was "
      "not found when it was configured, or it is a sanitizer build)");
}

}  // namespace

// Nothing to keep without a device.
struct DevicePush::Device {};

void DevicePush::DeviceDeleter::operator()(Device* d) const { delete d; }

Status DevicePushAvailable() { return NoCuda(); }

Status DevicePush::PackAndSend(std::span<const float>, uint32_t, uint32_t,
                               std::vector<uint64_t>*) {
  return NoCuda();
}

}  // namespace ps::worker
