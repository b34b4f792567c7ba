// DeviceMemory for builds without CUDA (device_memory.h): nothing is a
// device, and every request says why.
#include <cstdlib>

#include "core/device/device_memory.h"

namespace ps::xfer::internal {
namespace {

Status NoCuda() {
  return NotSupported(
      "this build has no CUDA support (nvcc was not found when it was "
      "configured, or it is a sanitizer build)");
}

class NoDeviceMemory : public DeviceMemory {
 public:
  Status Usable(int) override { return NoCuda(); }
  StatusOr<void*> Allocate(int, size_t) override { return NoCuda(); }
  void Free(int, void*) override {}
  Status Zero(int, void*, size_t) override { return NoCuda(); }
  Status ToDevice(int, void*, const void*, size_t) override { return NoCuda(); }
  Status FromDevice(int, void*, const void*, size_t) override {
    return NoCuda();
  }
  int DeviceOf(const void*) override { return -1; }
  void* AllocatePinned(size_t bytes) override { return std::malloc(bytes); }
  void FreePinned(void* p) override { std::free(p); }
  StatusOr<DeviceExport> Export(int, const void*, size_t) override {
    return NoCuda();
  }
  StatusOr<OpenedExport> Open(const DeviceExport&) override { return NoCuda(); }
  void Close(const OpenedExport&) override {}
  Status Copy(int, std::span<const CopyPiece>) override { return NoCuda(); }
};

}  // namespace

std::shared_ptr<DeviceMemory> DeviceMemory::Create() {
  return std::make_shared<NoDeviceMemory>();
}

}  // namespace ps::xfer::internal
