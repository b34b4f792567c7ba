// DeviceMemory over the CUDA driver API, loaded with dlopen on first use
// (device_memory.h). cuda.h gives the types and prototypes only; nothing of
// CUDA is linked.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/device/device_memory.h"

namespace ps::xfer::internal {
namespace {

// The driver's entry points this file calls, by their exported (versioned)
// names: cuda.h maps e.g. cuMemAlloc to cuMemAlloc_v2 with macros, which
// dlsym does not see.
struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGetCount) device_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_retain = nullptr;
  decltype(&::cuCtxSetCurrent) set_current = nullptr;
  decltype(&::cuMemAlloc) alloc = nullptr;
  decltype(&::cuMemFree) free = nullptr;
  decltype(&::cuMemsetD8) zero = nullptr;
  decltype(&::cuMemcpyHtoD) to_device = nullptr;
  decltype(&::cuMemcpyDtoH) from_device = nullptr;
  decltype(&::cuStreamSynchronize) stream_sync = nullptr;
  decltype(&::cuMemHostAlloc) host_alloc = nullptr;
  decltype(&::cuMemFreeHost) host_free = nullptr;
  decltype(&::cuPointerGetAttribute) pointer_attribute = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;
  decltype(&::cuMemcpy) copy = nullptr;
  // CUDA IPC and what it needs; null where the driver lacks them (Export
  // and Open then say so, the rest works).
  decltype(&::cuMemGetAddressRange) address_range = nullptr;
  decltype(&::cuDeviceGetUuid) device_uuid = nullptr;
  decltype(&::cuIpcGetMemHandle) ipc_get = nullptr;
  decltype(&::cuIpcOpenMemHandle) ipc_open = nullptr;
  decltype(&::cuIpcCloseMemHandle) ipc_close = nullptr;
};

static_assert(sizeof(CUipcMemHandle) == DeviceExport::kHandleBytes);
static_assert(sizeof(CUuuid) == sizeof(DeviceExport::device_uuid));

class CudaDeviceMemory : public DeviceMemory {
 public:
  ~CudaDeviceMemory() override {
    // Primary contexts stay retained until the process ends: releasing
    // them here could tear down a context the application's CUDA runtime
    // still uses. The library stays loaded for the same reason.
  }

  Status Usable(int device) override {
    PS_RETURN_IF_ERROR(Load());
    return Current(device);
  }

  StatusOr<void*> Allocate(int device, size_t bytes) override {
    PS_RETURN_IF_ERROR(Usable(device));
    CUdeviceptr p = 0;
    PS_RETURN_IF_ERROR(
        Check(api_.alloc(&p, bytes),
              "cuMemAlloc of " + std::to_string(bytes) + " bytes"));
    return reinterpret_cast<void*>(p);
  }

  void Free(int device, void* p) override {
    if (p == nullptr || !Usable(device).ok()) return;
    api_.free(reinterpret_cast<CUdeviceptr>(p));
  }

  Status Zero(int device, void* device_dst, size_t n) override {
    PS_RETURN_IF_ERROR(Usable(device));
    PS_RETURN_IF_ERROR(
        Check(api_.zero(reinterpret_cast<CUdeviceptr>(device_dst), 0, n),
              "zeroing " + std::to_string(n) +
                  " bytes of cuda:" + std::to_string(device)));
    // cuMemsetD8 on device memory returns before the device has run it.
    return Synchronize(device);
  }

  Status ToDevice(int device, void* device_dst, const void* host_src,
                  size_t n) override {
    PS_RETURN_IF_ERROR(Usable(device));
    PS_RETURN_IF_ERROR(Check(
        api_.to_device(reinterpret_cast<CUdeviceptr>(device_dst), host_src, n),
        "copy of " + std::to_string(n) +
            " bytes to cuda:" + std::to_string(device)));
    // From pageable memory cuMemcpyHtoD may return once the bytes are
    // staged, before they reach the device.
    return Synchronize(device);
  }

  Status FromDevice(int device, void* host_dst, const void* device_src,
                    size_t n) override {
    PS_RETURN_IF_ERROR(Usable(device));
    return Check(api_.from_device(host_dst,
                                  reinterpret_cast<CUdeviceptr>(device_src), n),
                 "copy of " + std::to_string(n) +
                     " bytes from cuda:" + std::to_string(device));
  }

  int DeviceOf(const void* p) override {
    if (!Load().ok()) return -1;
    unsigned int type = 0;
    if (api_.pointer_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               reinterpret_cast<CUdeviceptr>(p)) !=
            CUDA_SUCCESS ||
        type != CU_MEMORYTYPE_DEVICE) {
      return -1;
    }
    int ordinal = -1;
    if (api_.pointer_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                               reinterpret_cast<CUdeviceptr>(p)) !=
        CUDA_SUCCESS) {
      return -1;
    }
    return ordinal;
  }

  void* AllocatePinned(size_t bytes) override {
    void* p = nullptr;
    if (Usable(0).ok() &&
        api_.host_alloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(mu_);
      pinned_.insert(p);
      return p;
    }
    return std::malloc(bytes);  // still correct, only slower to copy
  }

  StatusOr<DeviceExport> Export(int device, const void* p,
                                size_t bytes) override {
    PS_RETURN_IF_ERROR(Usable(device));
    PS_RETURN_IF_ERROR(HaveIpc());
    const auto ptr = reinterpret_cast<CUdeviceptr>(p);
    CUdeviceptr base = 0;
    size_t size = 0;
    PS_RETURN_IF_ERROR(
        Check(api_.address_range(&base, &size, ptr), "cuMemGetAddressRange"));
    // The handle names the whole allocation: the bytes must lie inside it.
    if (ptr < base || ptr - base > size || size - (ptr - base) < bytes) {
      return InvalidArgument(std::to_string(bytes) +
                             " bytes of device memory span more than one "
                             "allocation; they cannot be exported as one");
    }
    CUipcMemHandle handle;
    const CUresult got = api_.ipc_get(&handle, base);
    if (got != CUDA_SUCCESS) {
      // Stream-ordered pools and cuMemCreate allocations have no legacy IPC
      // handle; the caller stages instead.
      return NotSupported(
          Check(got, "cuIpcGetMemHandle on cuda:" + std::to_string(device))
              .message());
    }
    DeviceExport exported;
    std::memcpy(exported.handle.data(), handle.reserved,
                exported.handle.size());
    exported.offset = ptr - base;
    PS_ASSIGN_OR_RETURN(exported.device_uuid, Uuid(device));
    return exported;
  }

  StatusOr<OpenedExport> Open(const DeviceExport& exported) override {
    PS_RETURN_IF_ERROR(Load());
    PS_RETURN_IF_ERROR(HaveIpc());
    // The same GPU as the owner's, found by UUID; else device 0, which then
    // reaches the owner's GPU as a peer (the flag enables that on demand).
    OpenedExport opened;
    opened.device = 0;
    const int count = DeviceCount();
    for (int d = 0; d < count; ++d) {
      StatusOr<std::array<uint8_t, 16>> uuid = Uuid(d);
      if (uuid.ok() && *uuid == exported.device_uuid) {
        opened.device = d;
        break;
      }
    }
    PS_RETURN_IF_ERROR(Current(opened.device));
    CUipcMemHandle handle;
    std::memcpy(handle.reserved, exported.handle.data(),
                exported.handle.size());
    CUdeviceptr base = 0;
    PS_RETURN_IF_ERROR(
        Check(api_.ipc_open(&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              "cuIpcOpenMemHandle on cuda:" + std::to_string(opened.device)));
    opened.base = reinterpret_cast<void*>(base);
    CUdeviceptr start = 0;
    Status sized = Check(api_.address_range(&start, &opened.bytes, base),
                         "cuMemGetAddressRange of an opened IPC handle");
    if (sized.ok() && start != base) {
      sized = Internal("an opened IPC handle does not start its allocation");
    }
    if (!sized.ok()) {
      api_.ipc_close(base);
      return sized;
    }
    return opened;
  }

  void Close(const OpenedExport& opened) override {
    if (opened.base == nullptr || !Usable(opened.device).ok() ||
        api_.ipc_close == nullptr) {
      return;
    }
    api_.ipc_close(reinterpret_cast<CUdeviceptr>(opened.base));
  }

  Status Copy(int device, std::span<const CopyPiece> pieces) override {
    PS_RETURN_IF_ERROR(Usable(device));
    for (const CopyPiece& piece : pieces) {
      if (piece.n == 0) continue;
      // Unified addressing: the driver tells host from device pointers,
      // including memory opened from another process.
      PS_RETURN_IF_ERROR(
          Check(api_.copy(reinterpret_cast<CUdeviceptr>(piece.dst),
                          reinterpret_cast<CUdeviceptr>(piece.src), piece.n),
                "copy of " + std::to_string(piece.n) +
                    " bytes on cuda:" + std::to_string(device)));
    }
    // cuMemcpy may return before the bytes arrive: from pageable host
    // memory once they are staged, and between device pointers at once.
    // It runs on the legacy default stream; waiting for that stream (not
    // the whole context, which would wait for the application's kernels
    // too) makes every piece land before the caller publishes anything (a
    // notify word) that says they did.
    return Synchronize(device);
  }

  void FreePinned(void* p) override {
    if (p == nullptr) return;
    // Memory the driver did not give is the malloc fallback's. A failed
    // cuMemFreeHost (no current context on this thread, a driver shutting
    // down) must not send driver memory to free().
    bool pinned = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pinned = pinned_.erase(p) > 0;
    }
    if (!pinned) {
      std::free(p);
    } else if (Usable(0).ok()) {
      api_.host_free(p);
    }
  }

 private:
  // Loads the driver and initializes it, once; the outcome is kept.
  Status Load() {
    std::call_once(loaded_, [this] { load_status_ = LoadOnce(); });
    return load_status_;
  }

  Status LoadOnce() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      return NotSupported(std::string("no CUDA driver: ") +
                          (why != nullptr ? why : "libcuda.so.1"));
    }
    bool found = true;
    auto bind = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(
          dlsym(lib, name));
      found = found && *fn != nullptr;
    };
    bind(&api_.init, "cuInit");
    bind(&api_.device_count, "cuDeviceGetCount");
    bind(&api_.device_get, "cuDeviceGet");
    bind(&api_.primary_retain, "cuDevicePrimaryCtxRetain");
    bind(&api_.set_current, "cuCtxSetCurrent");
    bind(&api_.alloc, "cuMemAlloc_v2");
    bind(&api_.free, "cuMemFree_v2");
    bind(&api_.zero, "cuMemsetD8_v2");
    bind(&api_.to_device, "cuMemcpyHtoD_v2");
    bind(&api_.from_device, "cuMemcpyDtoH_v2");
    bind(&api_.stream_sync, "cuStreamSynchronize");
    bind(&api_.host_alloc, "cuMemHostAlloc");
    bind(&api_.host_free, "cuMemFreeHost");
    bind(&api_.pointer_attribute, "cuPointerGetAttribute");
    bind(&api_.error_string, "cuGetErrorString");
    bind(&api_.copy, "cuMemcpy");
    // Optional: an older driver without them still stages.
    auto bind_optional = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(
          dlsym(lib, name));
    };
    bind_optional(&api_.address_range, "cuMemGetAddressRange_v2");
    bind_optional(&api_.device_uuid, "cuDeviceGetUuid_v2");
    bind_optional(&api_.ipc_get, "cuIpcGetMemHandle");
    bind_optional(&api_.ipc_open, "cuIpcOpenMemHandle_v2");
    bind_optional(&api_.ipc_close, "cuIpcCloseMemHandle");
    if (!found) {
      return NotSupported(
          "libcuda.so.1 lacks an entry point this build needs (a driver "
          "older than the CUDA headers it was built with?)");
    }
    PS_RETURN_IF_ERROR(Check(api_.init(0), "cuInit"));
    int count = 0;
    PS_RETURN_IF_ERROR(Check(api_.device_count(&count), "cuDeviceGetCount"));
    if (count == 0) return NotSupported("no CUDA device is visible");
    contexts_.assign(count, nullptr);
    return Status::OK();
  }

  // Makes `device`'s primary context current on this thread, retaining it
  // on first use.
  Status Current(int device) {
    CUcontext context = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (device < 0 || device >= static_cast<int>(contexts_.size())) {
        return InvalidArgument(
            "cuda:" + std::to_string(device) + " does not exist (" +
            std::to_string(contexts_.size()) + " device(s) visible)");
      }
      if (contexts_[device] == nullptr) {
        CUdevice d = 0;
        PS_RETURN_IF_ERROR(Check(api_.device_get(&d, device), "cuDeviceGet"));
        PS_RETURN_IF_ERROR(Check(api_.primary_retain(&contexts_[device], d),
                                 "cuDevicePrimaryCtxRetain"));
      }
      context = contexts_[device];
    }
    return Check(api_.set_current(context), "cuCtxSetCurrent");
  }

  Status HaveIpc() const {
    if (api_.address_range != nullptr && api_.device_uuid != nullptr &&
        api_.ipc_get != nullptr && api_.ipc_open != nullptr &&
        api_.ipc_close != nullptr) {
      return Status::OK();
    }
    return NotSupported("the CUDA driver lacks the IPC entry points");
  }

  int DeviceCount() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(contexts_.size());
  }

  StatusOr<std::array<uint8_t, 16>> Uuid(int device) {
    CUdevice d = 0;
    PS_RETURN_IF_ERROR(Check(api_.device_get(&d, device), "cuDeviceGet"));
    CUuuid uuid;
    PS_RETURN_IF_ERROR(Check(api_.device_uuid(&uuid, d), "cuDeviceGetUuid"));
    std::array<uint8_t, 16> bytes;
    std::memcpy(bytes.data(), uuid.bytes, bytes.size());
    return bytes;
  }

  // Waits for the legacy default stream, where the copies and memsets
  // above run, so that they are complete on return whichever stream the
  // application reads the memory from next.
  Status Synchronize(int device) {
    return Check(api_.stream_sync(nullptr),
                 "cuStreamSynchronize on cuda:" + std::to_string(device));
  }

  Status Check(CUresult result, const std::string& what) {
    if (result == CUDA_SUCCESS) return Status::OK();
    const char* text = nullptr;
    if (api_.error_string != nullptr) api_.error_string(result, &text);
    const std::string message = what + ": " +
                                (text != nullptr ? text : "CUDA error") + " (" +
                                std::to_string(result) + ")";
    if (result == CUDA_ERROR_NO_DEVICE ||
        result == CUDA_ERROR_NOT_INITIALIZED ||
        result == CUDA_ERROR_INVALID_DEVICE) {
      return NotSupported(message);
    }
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return ResourceExhausted(message);
    return Internal(message);
  }

  std::once_flag loaded_;
  Status load_status_;  // written once, under loaded_
  DriverApi api_;       // written once, under loaded_
  std::mutex mu_;
  std::vector<CUcontext> contexts_;   // by ordinal; guarded by mu_
  std::unordered_set<void*> pinned_;  // from cuMemHostAlloc; guarded by mu_
};

}  // namespace

std::shared_ptr<DeviceMemory> DeviceMemory::Create() {
  return std::make_shared<CudaDeviceMemory>();
}

}  // namespace ps::xfer::internal
