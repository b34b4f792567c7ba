// MemoryRegion: local memory that peers may reach with one-sided operations.
//
// A region has an id (never reused within a Context), a random 64-bit remote
// key that a peer must present, bounds and access flags. Regions made by
// Context::Allocate are backed by a memfd so a process on the same host can
// map them and copy without any help from this process; regions made by
// Context::Register wrap memory the application owns and are served by this
// process's progress threads. A memfd is sealed to its size, and against
// writes when peers may not write the region (core/internal/sealed_memfd.h):
// the access flags hold for same-host peers that map it, not only for the ones
// that ask.
//
// Regions are handed out as shared_ptr: Context::Deregister makes a region
// unreachable for peers at once, while an operation already copying into it
// keeps the memory alive until it ends.
//
// Thread-safety: immutable once registered; every accessor may be called
// from any thread. The bytes at data() are the application's to guard: a
// peer may read or write them at any time the access flags allow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/access.h"
#include "core/memory_kind.h"

namespace ps::xfer {

namespace internal {
class ContextImpl;
class DeviceMemory;
class LocalRegionState;
class RegionTable;
struct MemoryRegionAccess;
}  // namespace internal

class MemoryRegion {
 public:
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  uint64_t id() const { return id_; }
  uint64_t key() const { return key_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }
  uint32_t access() const { return access_; }
  bool memfd_backed() const { return memfd_ >= 0; }
  // Host memory, or a device's (then data() is a device pointer, which this
  // process's CPU must not dereference: Context::AllocateDevice).
  MemoryKind kind() const { return kind_; }
  int device() const { return device_; }  // the ordinal; 0 for host memory

  // The serialized descriptor a peer passes to Endpoint::Import. Small
  // (~100 bytes), safe to send over any channel, valid until Deregister or
  // until this process exits.
  const std::string& descriptor() const { return descriptor_; }

 private:
  friend class Context;
  friend class internal::ContextImpl;
  friend class internal::RegionTable;
  friend struct internal::MemoryRegionAccess;
  MemoryRegion();

  uint64_t id_ = 0;
  uint64_t key_ = 0;
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_size_ = 0;  // page-rounded, for munmap (memfd regions)
  uint32_t access_ = 0;
  MemoryKind kind_ = MemoryKind::kHost;
  int device_ = 0;
  // Device memory's driver: copies into the region go through it, and
  // Context::AllocateDevice's memory is freed with it.
  std::shared_ptr<internal::DeviceMemory> device_memory_;
  bool owns_device_memory_ = false;
  int memfd_ = -1;
  // What same-host peers receive instead of memfd_ when they may not write
  // (a read-only descriptor of the same memfd); -1: memfd_ itself. The
  // memfd's seals do the enforcing (core/internal/sealed_memfd.h).
  int peer_memfd_ = -1;
  int peer_memfd() const { return peer_memfd_ >= 0 ? peer_memfd_ : memfd_; }
  // Each transport provider's part of the region (internal/region_state.h),
  // withdrawn at Deregister; fixed once the region is registered.
  std::vector<std::unique_ptr<internal::LocalRegionState>> transport_states_;
  std::string descriptor_;
};

}  // namespace ps::xfer
