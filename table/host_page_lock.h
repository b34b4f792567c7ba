// HostPageLock: a range of host memory kept page-locked (cudaHostRegister)
// for as long as the object lives. DeviceParamTable::Apply uploads from
// page-locked memory by DMA; from pageable memory it first copies the bytes
// into a pinned staging buffer. A device server's apply threads decode each
// packet into scratch buffers they lock this way, which saves that copy:
// 4 bytes per row index plus 4 per value of every packet (server/inboxes.h
// says why the inbox slots themselves are not the place).
//
// Builds without CUDA (table/CMakeLists.txt) get host_page_lock_stub.cc,
// whose Create returns kNotSupported.
//
// Thread-safety: Create may run on any thread; the memory must stay
// allocated until the lock is destroyed.
#pragma once

#include <cstddef>
#include <memory>

#include "base/status_or.h"

namespace ps::table {

class HostPageLock {
 public:
  // Locks [data, data + bytes). kNotSupported without CUDA or a usable
  // device; kInternal with the CUDA error otherwise (RLIMIT_MEMLOCK, say).
  static StatusOr<std::unique_ptr<HostPageLock>> Create(void* data,
                                                        size_t bytes);
  ~HostPageLock();  // unlocks
  HostPageLock(const HostPageLock&) = delete;
  HostPageLock& operator=(const HostPageLock&) = delete;

 private:
  explicit HostPageLock(void* data) : data_(data) {}
  void* const data_;
};

}  // namespace ps::table
