// internal::DeviceStaging: a stream connection's way into device memory
// (core/memory_kind.h). The CPU cannot read or write a GPU's memory, so the
// bytes of a put pass from the socket through one page-locked buffer of the
// connection into the device, and the bytes a get asks for are copied out
// to host memory before they are sent. The buffer is allocated on the first
// device request, so connections that never touch device memory cost
// nothing.
//
// Thread-compatible: one per connection, used by its serving thread.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "core/memory_region.h"

namespace ps::xfer::internal {

class DeviceMemory;

class DeviceStaging {
 public:
  // Bytes moved per step: large enough that a copy runs at the bus's
  // speed, small enough to stay in the cache between socket and copy.
  static constexpr size_t kBufferBytes = 1 << 20;

  DeviceStaging() = default;
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // Receives `length` bytes from `fd` into `region`'s device memory at
  // `dst` (an address inside it). Returns what failed on the socket (the
  // connection is then broken); a failed copy to the device is *copy_failed
  // instead, and the rest of the bytes are still read, so the request can
  // be answered with it.
  Status Receive(int fd, const MemoryRegion& region, char* dst, uint64_t length,
                 Status* copy_failed);
  // Copies the bytes of `segments` (addresses inside `region`'s device
  // memory) into *out, one after the other.
  Status Gather(const MemoryRegion& region, std::span<const iovec> segments,
                std::vector<char>* out);

 private:
  std::shared_ptr<DeviceMemory> memory_;  // set with buffer_
  char* buffer_ = nullptr;                // kBufferBytes, page-locked
};

}  // namespace ps::xfer::internal
