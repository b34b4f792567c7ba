// internal::LivenessPage: one word per shareable region, in a memfd that
// same-host peers map read-only (and cannot write: it is sealed against
// writes and they receive a read-only descriptor, see sealed_memfd.h). A live
// region's word holds its key; it is zeroed on Deregister. A peer that copies
// into mapped memory checks the word first, so a deregistered region is refused
// without the owner's CPU taking part, and a racing copy lands in memory that
// stays mapped (never a crash).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/status_or.h"
#include "core/internal/sealed_memfd.h"

namespace ps::xfer::internal {

class LivenessPage {
 public:
  static constexpr uint32_t kSlots = 1 << 16;
  static constexpr size_t kBytes = kSlots * sizeof(uint64_t);

  static StatusOr<std::unique_ptr<LivenessPage>> Create();
  ~LivenessPage();

  // The descriptor a same-host peer receives: read-only.
  int peer_fd() const { return memfd_.peer_fd(); }
  // Claims a free slot and publishes `key` in it.
  StatusOr<uint32_t> Acquire(uint64_t key);
  // Zeroes the slot and frees it.
  void Release(uint32_t slot);

 private:
  LivenessPage() = default;
  SealedMemfd memfd_;
  uint64_t* words_ = nullptr;
  std::mutex mu_;
  std::vector<uint32_t> free_;  // guarded by mu_
};

}  // namespace ps::xfer::internal
