#include "core/registered_pool.h"

#include <unistd.h>

#include <algorithm>

namespace ps::xfer {
namespace {

bool PowerOfTwo(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

StatusOr<std::unique_ptr<RegisteredPool>> RegisteredPool::Create(
    Context* context, size_t bytes, uint32_t access, size_t alignment) {
  if (context == nullptr) return InvalidArgument("pool without a context");
  if (alignment < 8 || alignment > PageSize() || !PowerOfTwo(alignment)) {
    return InvalidArgument("pool alignment " + std::to_string(alignment) +
                           " is not a power of two from 8 to " +
                           std::to_string(PageSize()));
  }
  PS_ASSIGN_OR_RETURN(std::shared_ptr<MemoryRegion> region,
                      context->Allocate(bytes, access));
  return std::unique_ptr<RegisteredPool>(
      new RegisteredPool(context, std::move(region), alignment));
}

RegisteredPool::RegisteredPool(Context* context,
                               std::shared_ptr<MemoryRegion> region,
                               size_t alignment)
    : context_(context), region_(std::move(region)), alignment_(alignment) {
  free_[0] = region_->size();
}

RegisteredPool::~RegisteredPool() { (void)context_->Deregister(*region_); }

StatusOr<PoolBlock> RegisteredPool::Allocate(size_t bytes, size_t alignment) {
  if (bytes == 0) return InvalidArgument("pool block of 0 bytes");
  if (alignment == 0) alignment = alignment_;
  if (alignment > PageSize() || !PowerOfTwo(alignment)) {
    return InvalidArgument("block alignment " + std::to_string(alignment) +
                           " is not a power of two up to " +
                           std::to_string(PageSize()));
  }
  alignment = std::max(alignment, alignment_);
  if (bytes > capacity()) {
    return ResourceExhausted("a block of " + std::to_string(bytes) +
                             " bytes is larger than the pool (" +
                             std::to_string(capacity()) + " bytes)");
  }
  // Sizes in whole alignment units keep every free range aligned to the
  // pool's alignment.
  const uint64_t length = RoundUp(bytes, alignment_);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = it->first;
    const uint64_t end = start + it->second;
    const uint64_t at = RoundUp(start, alignment);
    if (at + length > end) continue;
    free_.erase(it);
    if (at > start) free_[start] = at - start;
    if (at + length < end) free_[at + length] = end - (at + length);
    live_[at] = length;
    used_ += length;
    return PoolBlock{at, bytes, static_cast<uint8_t*>(region_->data()) + at};
  }
  size_t largest = 0;
  for (const auto& [start, size] : free_) largest = std::max(largest, size);
  return ResourceExhausted(
      "the pool has no room for a block of " + std::to_string(bytes) +
      " bytes: " + std::to_string(capacity() - used_) + " of " +
      std::to_string(capacity()) + " bytes free, the largest free piece " +
      std::to_string(largest) + " bytes");
}

Status RegisteredPool::Free(const PoolBlock& block) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(block.offset);
  if (it == live_.end() ||
      block.data != static_cast<uint8_t*>(region_->data()) + block.offset) {
    return InvalidArgument("no live block of this pool at offset " +
                           std::to_string(block.offset) +
                           " (freed already, or from another pool)");
  }
  const uint64_t length = it->second;
  live_.erase(it);
  used_ -= length;
  InsertFree(block.offset, length);
  return Status::OK();
}

void RegisteredPool::InsertFree(uint64_t offset, uint64_t size) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_.emplace_hint(next, offset, size);
}

size_t RegisteredPool::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

size_t RegisteredPool::largest_free() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t largest = 0;
  for (const auto& [start, size] : free_) {
    const uint64_t at = RoundUp(start, alignment_);
    if (at < start + size)
      largest = std::max<size_t>(largest, start + size - at);
  }
  return largest;
}

}  // namespace ps::xfer
