// Huge pages for large arrays. Two tools:
//
// ReserveOnHugePages: room for a large vector that is about to be written
// once from start to end (a checkpoint's copy of a table), backed by
// transparent huge pages where the kernel allows them (madvise
// MADV_HUGEPAGE; the default "madvise" mode of Debian's kernels gives them
// only to memory that asks). The first write of each 4 KiB page costs a
// page fault; in a virtual machine each costs tens of microseconds (this
// project's machine: 256 MB written fresh took 1.4-1.7 s on 4 KiB pages,
// 0.4-0.7 s on huge ones), which made the copy of a 3 GB table at a cut
// take 30 s.
//
// HugePageAllocator: a std::vector allocator for arrays read at random (an
// exact table's key index). Each random read of a large array on 4 KiB
// pages also misses the TLB, and in a virtual machine a TLB miss walks two
// page tables; on 2 MiB pages a few hundred entries cover gigabytes.
// Arrays of at least kHugePageBytes get their own mapping, aligned to 2 MiB
// and advised as a whole: every whole 2 MiB of the array is a huge page
// and the tail stays on 4 KiB pages. Smaller ones come from operator new
// (and all under ASan: kLargeArraysMapped). Meant for arrays written whole
// when allocated: a huge page is committed whole at its first write.
//
// Thread-safe as the vector is (one caller per vector); the allocator has
// no state.
#pragma once

#include <cstddef>
#include <limits>
#include <new>
#include <vector>

namespace ps {

// Asks for huge pages for the whole 4 KiB pages inside [data, data +
// bytes). Advice only: nothing fails where the kernel gives none.
void AdviseHugePages(void* data, size_t bytes);

// Empties `v` and reserves room for `n` elements on huge pages. A vector
// whose capacity is already larger keeps its memory as it is.
template <class T>
void ReserveOnHugePages(std::vector<T>* v, size_t n) {
  v->clear();
  if (v->capacity() >= n) return;
  std::vector<T>().swap(*v);  // no copy of the old contents
  v->reserve(n);
  AdviseHugePages(v->data(), n * sizeof(T));
}

inline constexpr size_t kPageBytes = 4096;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// `bytes` rounded up to whole 4 KiB pages (also an address to the next
// page boundary).
inline constexpr size_t RoundUpToPage(size_t bytes) {
  return (bytes + kPageBytes - 1) & ~(kPageBytes - 1);
}
// Under AddressSanitizer every array comes from operator new, whose
// redzones catch reads past its end; a mapping of our own has none.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kLargeArraysMapped = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kLargeArraysMapped = false;
#else
inline constexpr bool kLargeArraysMapped = true;
#endif
#else
inline constexpr bool kLargeArraysMapped = true;
#endif

// `bytes` of memory aligned for any type: from operator new below
// kHugePageBytes, else mapped and advised as above. Null without memory.
void* AllocateOnHugePages(size_t bytes);
// Frees what AllocateOnHugePages(bytes) returned, given the same bytes.
void FreeOnHugePages(void* data, size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: converts

  T* allocate(size_t n) {
    if (n > std::numeric_limits<size_t>::max() / sizeof(T)) {
      throw std::bad_array_new_length();
    }
    void* data = AllocateOnHugePages(n * sizeof(T));
    if (data == nullptr) throw std::bad_alloc();
    return static_cast<T*>(data);
  }
  void deallocate(T* data, size_t n) { FreeOnHugePages(data, n * sizeof(T)); }

  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace ps
