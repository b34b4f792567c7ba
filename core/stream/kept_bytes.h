// KeptBytes: one request's bytes (header, segment table, payload), kept by
// a StreamTransport until its reply so that it can be sent again on a new
// connection. KeptBytesPool recycles their buffers: a stream of large puts
// pays a copy per request, not an allocation and its page faults too.
//
// Thread-safety: KeptBytes belongs to one request; the pool is thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace ps::xfer::internal {

class KeptBytes {
 public:
  KeptBytes() = default;
  KeptBytes(KeptBytes&&) = default;
  KeptBytes& operator=(KeptBytes&&) = default;

  char* data() { return buffer_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  friend class KeptBytesPool;
  std::unique_ptr<char[]> buffer_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

class KeptBytesPool {
 public:
  // Keeps at most `max_bytes` of free buffers.
  explicit KeptBytesPool(size_t max_bytes) : max_bytes_(max_bytes) {}

  // A buffer of `size` bytes (contents undefined): a free one that fits,
  // else a new one.
  KeptBytes Take(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = free_.size(); i-- > 0;) {
        if (free_[i].capacity_ >= size) {
          KeptBytes b = std::move(free_[i]);
          free_[i] = std::move(free_.back());
          free_.pop_back();
          free_bytes_ -= b.capacity_;
          b.size_ = size;
          return b;
        }
      }
    }
    KeptBytes b;
    // Rounded up to a page multiple, so near sizes share buffers.
    b.capacity_ = (size + 4095) & ~size_t{4095};
    b.buffer_.reset(new char[b.capacity_]);
    b.size_ = size;
    return b;
  }

  // Takes back a buffer whose request completed.
  void Give(KeptBytes bytes) {
    if (bytes.capacity_ == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_bytes_ + bytes.capacity_ > max_bytes_) return;  // freed
    free_bytes_ += bytes.capacity_;
    free_.push_back(std::move(bytes));
  }

 private:
  const size_t max_bytes_;
  std::mutex mu_;
  std::vector<KeptBytes> free_;  // guarded by mu_
  size_t free_bytes_ = 0;        // guarded by mu_
};

}  // namespace ps::xfer::internal
