#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace ps {

void AdviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + kPage - 1) & ~(kPage - 1);
  const uintptr_t end =
      (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kPage - 1);
  if (end <= begin) return;
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace ps
