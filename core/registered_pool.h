// RegisteredPool: one large region registered once and handed out in
// blocks, so that a program that needs many short-lived transfer buffers (a
// KV cache per request, staging for a layer) neither registers per buffer
// nor sends a descriptor per buffer. Peers import the pool's descriptor
// once and address a block by (descriptor, block offset).
//
//   auto pool = RegisteredPool::Create(ctx, 1 << 30, kRemoteWrite).value();
//   send_to_peer(pool->descriptor());
//   PoolBlock kv = pool->Allocate(layer_bytes).value();  // kv.data, kv.offset
//   ...
//   pool->Free(kv);
//
// Blocks are carved first-fit from the free ranges, aligned as asked, and a
// freed block merges with free neighbours. A request that no free range can
// hold fails with kResourceExhausted (saying how much is free and the
// largest piece); nothing is registered again.
//
// Thread-safe: any number of threads may allocate and free at once. The
// Context must outlive the pool; the pool's destructor deregisters the
// region (peers then get kNotRegistered).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "core/memory_region.h"

namespace ps::xfer {

struct PoolBlock {
  uint64_t offset = 0;   // in the pool's region: what a peer addresses
  size_t size = 0;       // as asked
  void* data = nullptr;  // this process's address of the block
};

class RegisteredPool {
 public:
  static constexpr size_t kDefaultAlignment = 64;

  // Allocates and registers a region of `bytes` with `access` in `context`.
  // Blocks are aligned to `alignment` unless Allocate asks for more: a
  // power of two from 8 to the page size (kInvalidArgument otherwise).
  static StatusOr<std::unique_ptr<RegisteredPool>> Create(
      Context* context, size_t bytes, uint32_t access,
      size_t alignment = kDefaultAlignment);
  ~RegisteredPool();
  RegisteredPool(const RegisteredPool&) = delete;
  RegisteredPool& operator=(const RegisteredPool&) = delete;

  // A block of `bytes` (> 0), aligned to `alignment` (0: the pool's; else a
  // power of two up to the page size). kResourceExhausted when no free
  // range holds it.
  StatusOr<PoolBlock> Allocate(size_t bytes, size_t alignment = 0);
  // Returns the block to the pool. kInvalidArgument when `block` is not a
  // live block of this pool (freed twice, or never allocated here).
  Status Free(const PoolBlock& block);

  const MemoryRegion& region() const { return *region_; }
  const std::string& descriptor() const { return region_->descriptor(); }
  size_t capacity() const { return region_->size(); }
  // Bytes in live blocks (with their alignment padding).
  size_t used() const;
  // The largest block that Allocate could hand out now at the pool's
  // alignment.
  size_t largest_free() const;

 private:
  RegisteredPool(Context* context, std::shared_ptr<MemoryRegion> region,
                 size_t alignment);
  void InsertFree(uint64_t offset, uint64_t size);  // merging neighbours

  Context* const context_;
  const std::shared_ptr<MemoryRegion> region_;
  const size_t alignment_;
  mutable std::mutex mu_;
  // Free ranges and live blocks, offset -> bytes taken (whole alignment
  // units). Guarded by mu_.
  std::map<uint64_t, uint64_t> free_;
  std::unordered_map<uint64_t, uint64_t> live_;
  size_t used_ = 0;
};

}  // namespace ps::xfer
