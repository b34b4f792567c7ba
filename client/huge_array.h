// HugeArray<T>: a large zero-filled array backed by 2 MiB transparent huge
// pages where the kernel allows them. The push sums and the whole-table pull
// copy are hit at random by millions of keys; with 4 KiB pages nearly every
// access also misses the TLB, which costs more than the cache miss itself.
//
// Not thread-safe, like std::vector: Resize needs exclusive use; elements
// may be written by several threads at different indices.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

namespace ps::worker {

template <typename T>
class HugeArray {
 public:
  HugeArray() = default;
  ~HugeArray() { Release(); }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  HugeArray(HugeArray&& o) noexcept { *this = std::move(o); }
  HugeArray& operator=(HugeArray&& o) noexcept {
    if (this != &o) {
      Release();
      std::swap(data_, o.data_);
      std::swap(size_, o.size_);
      std::swap(mapped_, o.mapped_);
    }
    return *this;
  }

  // Makes room for n zero-filled elements (keeps the mapping when it is
  // large enough, without zeroing it: callers keep it clean or overwrite).
  // Throws std::bad_alloc when the memory cannot be mapped.
  void Resize(size_t n) {
    if (n * sizeof(T) <= mapped_) {
      size_ = n;
      return;
    }
    Release();
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = (n * sizeof(T) + kHuge - 1) / kHuge * kHuge;
    void* p = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    // Align to 2 MiB and give back the rest.
    auto base = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (base + kHuge - 1) / kHuge * kHuge;
    if (aligned > base) munmap(p, aligned - base);
    const uintptr_t end = base + bytes + kHuge;
    if (end > aligned + bytes) {
      munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
    }
    madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
    data_ = reinterpret_cast<T*>(aligned);
    mapped_ = bytes;
    size_ = n;
  }
  // Zeroes the first n elements.
  void Zero(size_t n) { std::memset(data_, 0, n * sizeof(T)); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void Release() {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = nullptr;
    size_ = 0;
    mapped_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace ps::worker
