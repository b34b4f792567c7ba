#include "core/internal/region_table.h"

#include <mutex>

namespace ps::xfer::internal {

std::shared_ptr<MemoryRegion> RegionTable::WrapForTesting(
    uint64_t id, uint64_t key, void* data, size_t size, uint32_t access) {
  std::shared_ptr<MemoryRegion> region(new MemoryRegion());
  region->id_ = id;
  region->key_ = key;
  region->data_ = data;
  region->size_ = size;
  region->access_ = access;
  return region;
}

void RegionTable::Insert(std::shared_ptr<MemoryRegion> region) {
  std::unique_lock lock(mu_);
  uint64_t id = region->id();
  regions_.emplace(id, std::move(region));
}

StatusOr<std::shared_ptr<MemoryRegion>> RegionTable::Remove(uint64_t id) {
  std::unique_lock lock(mu_);
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return NotRegistered("region " + std::to_string(id) + " on " + owner_ +
                         " is not registered");
  }
  auto region = std::move(it->second);
  regions_.erase(it);
  return region;
}

StatusOr<std::shared_ptr<MemoryRegion>> RegionTable::Check(
    uint64_t id, uint64_t key, uint64_t instance, uint64_t offset,
    uint64_t length, uint32_t access, const std::string& peer) const {
  // Words an error; the checks that pass build no string.
  auto where = [&] {
    return "region " + std::to_string(id) + " on " + owner_ + " (from " + peer +
           ")";
  };
  if (instance != instance_) {
    return StaleDescriptor(where() +
                           ": the descriptor is from an earlier instance of " +
                           owner_ + "; import a fresh one");
  }
  std::shared_ptr<MemoryRegion> region;
  {
    std::shared_lock lock(mu_);
    auto it = regions_.find(id);
    if (it != regions_.end()) region = it->second;
  }
  if (region == nullptr) return NotRegistered(where() + " is not registered");
  if (region->key() != key) return InvalidKey(where() + ": wrong remote key");
  if ((region->access() & access) != access) {
    return AccessDenied(where() + " allows " +
                        AccessToString(region->access()) + ", not " +
                        AccessToString(access));
  }
  if (!InBounds(offset, length, region->size())) {
    return OutOfRange(where() + ": offset " + std::to_string(offset) + " + " +
                      std::to_string(length) + " is past its end (" +
                      std::to_string(region->size()) + " bytes)");
  }
  return region;
}

}  // namespace ps::xfer::internal
