#include "base/growing_array.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/huge_pages.h"

namespace ps {
namespace {

// Arrays of at least this many bytes live in a mapping of their own (a
// smaller one would waste most of its last page).
constexpr size_t kMappedBytes = size_t{64} << 10;

bool Mapped(size_t bytes) {
  return kLargeArraysMapped && bytes >= kMappedBytes;
}

}  // namespace

GrownStorage GrowStorage(void* data, size_t old_bytes, size_t used,
                         size_t new_bytes) {
  if (!Mapped(new_bytes)) {
    void* grown = std::realloc(data, new_bytes);
    return grown == nullptr ? GrownStorage{nullptr, 0}
                            : GrownStorage{grown, new_bytes};
  }
  const size_t length = RoundUpToPage(new_bytes);
  if (Mapped(old_bytes)) {
    void* grown =
        ::mremap(data, RoundUpToPage(old_bytes), length, MREMAP_MAYMOVE);
    return grown == MAP_FAILED ? GrownStorage{nullptr, 0}
                               : GrownStorage{grown, length};
  }
  // From the heap into a mapping: the one copy.
  void* mapped = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return {nullptr, 0};
  if (used != 0) std::memcpy(mapped, data, used);
  std::free(data);
  return {mapped, length};
}

void FreeStorage(void* data, size_t bytes) {
  if (data == nullptr) return;
  if (Mapped(bytes)) {
    ::munmap(data, RoundUpToPage(bytes));
  } else {
    std::free(data);
  }
}

}  // namespace ps
