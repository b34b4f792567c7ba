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
// Thread-safe as the vector is (one caller per vector).
#pragma once

#include <cstddef>
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

}  // namespace ps
