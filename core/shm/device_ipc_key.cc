#include "core/shm/device_ipc_key.h"

#include <cstdint>
#include <cstring>

namespace ps::xfer::internal {
namespace {

constexpr uint32_t kMagic = 0x43495043;  // "CIPC"
constexpr uint32_t kVersion = 1;

}  // namespace

std::string PackDeviceIpcKey(const DeviceExport& exported) {
  std::string key(kDeviceIpcKeyBytes, '\0');
  char* at = key.data();
  auto put = [&at](const void* p, size_t n) {
    std::memcpy(at, p, n);
    at += n;
  };
  put(&kMagic, sizeof(kMagic));
  put(&kVersion, sizeof(kVersion));
  put(exported.handle.data(), exported.handle.size());
  put(&exported.offset, sizeof(exported.offset));
  put(exported.device_uuid.data(), exported.device_uuid.size());
  return key;
}

StatusOr<DeviceExport> ParseDeviceIpcKey(std::string_view key) {
  if (key.size() != kDeviceIpcKeyBytes) {
    return InvalidArgument("malformed CUDA IPC key in a region descriptor: " +
                           std::to_string(key.size()) + " bytes, not " +
                           std::to_string(kDeviceIpcKeyBytes));
  }
  const char* at = key.data();
  auto get = [&at](void* p, size_t n) {
    std::memcpy(p, at, n);
    at += n;
  };
  uint32_t magic = 0, version = 0;
  get(&magic, sizeof(magic));
  get(&version, sizeof(version));
  if (magic != kMagic || version != kVersion) {
    return InvalidArgument(
        "malformed CUDA IPC key in a region descriptor: unknown format "
        "(magic " +
        std::to_string(magic) + ", version " + std::to_string(version) + ")");
  }
  DeviceExport exported;
  get(exported.handle.data(), exported.handle.size());
  get(&exported.offset, sizeof(exported.offset));
  get(exported.device_uuid.data(), exported.device_uuid.size());
  return exported;
}

}  // namespace ps::xfer::internal
