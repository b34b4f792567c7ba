#include "core/shm/liveness_page.h"

#include <sys/mman.h>

namespace ps::xfer::internal {

StatusOr<std::unique_ptr<LivenessPage>> LivenessPage::Create() {
  std::unique_ptr<LivenessPage> page(new LivenessPage());
  PS_ASSIGN_OR_RETURN(page->memfd_,
                      SealedMemfd::Create("xfer-liveness", kBytes,
                                          /*peers_may_write=*/false));
  page->words_ = static_cast<uint64_t*>(page->memfd_.data);
  page->free_.reserve(kSlots - 1);
  for (uint32_t s = kSlots - 1; s >= 1; --s) page->free_.push_back(s);
  return page;
}

LivenessPage::~LivenessPage() {
  if (words_ != nullptr) munmap(words_, kBytes);
}

StatusOr<uint32_t> LivenessPage::Acquire(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) {
    return ResourceExhausted("all " + std::to_string(kSlots - 1) +
                             " shareable region slots are in use");
  }
  uint32_t slot = free_.back();
  free_.pop_back();
  __atomic_store_n(&words_[slot], key, __ATOMIC_RELEASE);
  return slot;
}

void LivenessPage::Release(uint32_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  __atomic_store_n(&words_[slot], uint64_t{0}, __ATOMIC_RELEASE);
  free_.push_back(slot);
}

}  // namespace ps::xfer::internal
