// Pieces shared by sparse_detect.cc and its AVX2 twin.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ps::kernels::internal {

// A growable index buffer that does not zero what it reserves: the scanners
// write up to 32 indices past the end before they know how many count.
class IndexBuffer {
 public:
  size_t size() const { return size_; }
  const uint32_t* data() const { return data_.get(); }
  void clear() { size_ = 0; }
  // Makes room for `extra` more entries and returns where they go.
  uint32_t* Reserve(size_t extra) {
    if (size_ + extra > cap_) {
      size_t cap = std::max(cap_ * 2, size_ + extra + 1024);
      std::unique_ptr<uint32_t[]> grown(new uint32_t[cap]);
      if (size_ > 0) std::copy(data_.get(), data_.get() + size_, grown.get());
      data_ = std::move(grown);
      cap_ = cap;
    }
    return data_.get() + size_;
  }
  void Commit(size_t n) { size_ += n; }
  void Push(uint32_t v) {
    *Reserve(1) = v;
    ++size_;
  }

 private:
  std::unique_ptr<uint32_t[]> data_;
  size_t size_ = 0, cap_ = 0;
};

// The order key of |g|: the bits of |g| as an unsigned integer (which orders
// non-negative floats), with NaN mapped to 0 (ranked like zero).
inline uint32_t MagnitudeKey(uint32_t bits) {
  uint32_t key = bits & 0x7fffffff;
  return key > 0x7f800000 ? 0 : key;
}

// Appends i in [begin, end) with |g[i]| >= eps / MagnitudeKey(g[i]) >= key.
void ScanGeEpsScalar(const float* g, size_t begin, size_t end, float eps,
                     IndexBuffer* out);
void ScanGeEpsAvx2(const float* g, size_t begin, size_t end, float eps,
                   IndexBuffer* out);
void ScanGeKeyScalar(const float* g, size_t begin, size_t end, uint32_t key,
                     IndexBuffer* out);
void ScanGeKeyAvx2(const float* g, size_t begin, size_t end, uint32_t key,
                   IndexBuffer* out);

}  // namespace ps::kernels::internal
