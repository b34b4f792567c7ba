// GrowingArray<T>: an array of trivially copyable elements that grows at
// its end without copying what it holds, for tables that grow a row at a
// time (an exact table's rows and their state: table/exact_partition.h).
//
// A std::vector that runs out of room allocates twice the room, copies
// every element there and frees the old array. The copy writes fresh
// memory, which costs a page fault per 4 KiB page (tens of microseconds
// in a virtual machine), and the old pages are thrown away: a vector that
// doubled up to N bytes has faulted in about 2N. From kMappedBytes on, a
// GrowingArray lives in an anonymous mapping of its own, and growing
// remaps it (mremap): the kernel moves the page table entries, not the
// bytes, and only the added room is new (measured: growing the row arrays
// was 13% of a server inserting 10M fresh keys, with std::vector).
// Smaller arrays, and all under AddressSanitizer (whose redzones need
// operator new's memory: kLargeArraysMapped), grow by copying, as a
// vector does.
//
// Not thread-safe: one owner, which guards it. Pointers into it are
// invalidated by Reserve and Resize, as a vector's are.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace ps {

// The storage behind GrowingArray, in bytes. Moves `data` (of `old_bytes`
// room, `used` of them in use; null when old_bytes is 0) to room for at
// least `new_bytes` > old_bytes, and returns it and its room; {null, 0}
// without memory, `data` unchanged then.
struct GrownStorage {
  void* data;
  size_t bytes;
};
GrownStorage GrowStorage(void* data, size_t old_bytes, size_t used,
                         size_t new_bytes);
// Frees what GrowStorage returned, given its room.
void FreeStorage(void* data, size_t bytes);

template <class T>
class GrowingArray {
  static_assert(std::is_trivially_copyable_v<T>,
                "GrowingArray moves its elements as bytes");

 public:
  GrowingArray() = default;
  ~GrowingArray() { FreeStorage(data_, capacity_ * sizeof(T)); }
  GrowingArray(GrowingArray&& other) noexcept { Swap(other); }
  GrowingArray& operator=(GrowingArray&& other) noexcept {
    GrowingArray(std::move(other)).Swap(*this);
    return *this;
  }
  GrowingArray(const GrowingArray&) = delete;
  GrowingArray& operator=(const GrowingArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }

  // Room for at least n elements; false without memory (nothing changed).
  bool Reserve(size_t n) {
    if (n <= capacity_) return true;
    if (n > SIZE_MAX / sizeof(T)) return false;
    const GrownStorage grown = GrowStorage(data_, capacity_ * sizeof(T),
                                           size_ * sizeof(T), n * sizeof(T));
    if (grown.data == nullptr) return false;
    data_ = static_cast<T*>(grown.data);
    capacity_ = grown.bytes / sizeof(T);
    return true;
  }
  // n elements, the added ones equal to `fill`; the room at least doubles
  // when it grows. False without memory (nothing changed).
  bool Resize(size_t n, const T& fill = T{}) {
    if (n > capacity_ && !Reserve(std::max(n, 2 * capacity_))) return false;
    std::fill(data_ + std::min(n, size_), data_ + n, fill);
    size_ = n;
    return true;
  }
  // No elements; the room stays.
  void Clear() { size_ = 0; }

 private:
  void Swap(GrowingArray& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace ps
