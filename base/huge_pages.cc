#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace ps {
namespace {

bool Mapped(size_t bytes) {
  return kLargeArraysMapped && bytes >= kHugePageBytes;
}

}  // namespace

void AdviseHugePages(void* data, size_t bytes) {
  const uintptr_t begin = RoundUpToPage(reinterpret_cast<uintptr_t>(data));
  const uintptr_t end =
      (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kPageBytes - 1);
  if (end <= begin) return;
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

void* AllocateOnHugePages(size_t bytes) {
  if (!Mapped(bytes)) return ::operator new(bytes, std::nothrow);
  // Mapped with 2 MiB to spare, then trimmed to an aligned start: the
  // mapping is exactly the array's pages, so the kernel gives huge pages
  // to its whole 2 MiB ranges and none past its end.
  const size_t length = RoundUpToPage(bytes);
  const size_t padded = length + kHugePageBytes;
  void* mapped = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t begin = (base + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  if (begin > base) ::munmap(mapped, begin - base);
  const uintptr_t end = begin + length;
  if (base + padded > end) {
    ::munmap(reinterpret_cast<void*>(end), base + padded - end);
  }
  (void)::madvise(reinterpret_cast<void*>(begin), length, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(begin);
}

void FreeOnHugePages(void* data, size_t bytes) {
  if (data == nullptr) return;
  if (!Mapped(bytes)) {
    ::operator delete(data);
    return;
  }
  ::munmap(data, RoundUpToPage(bytes));
}

}  // namespace ps
