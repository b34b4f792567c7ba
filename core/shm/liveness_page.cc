#include "core/shm/liveness_page.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace ps::xfer::internal {

StatusOr<std::unique_ptr<LivenessPage>> LivenessPage::Create() {
  std::unique_ptr<LivenessPage> page(new LivenessPage());
  page->fd_ = UniqueFd(memfd_create("xfer-liveness", MFD_CLOEXEC));
  if (!page->fd_.valid()) {
    return ErrnoStatus(StatusCode::kIOError, "memfd_create", errno);
  }
  if (ftruncate(page->fd_.get(), kBytes) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "ftruncate liveness page", errno);
  }
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                 page->fd_.get(), 0);
  if (p == MAP_FAILED) {
    return ErrnoStatus(StatusCode::kIOError, "mmap liveness page", errno);
  }
  page->words_ = static_cast<uint64_t*>(p);
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
