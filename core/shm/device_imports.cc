#include "core/shm/device_imports.h"

namespace ps::xfer::internal {

DeviceImports::~DeviceImports() {
  for (const auto& [region, opened] : opened_) memory_->Close(opened);
}

StatusOr<OpenedExport> DeviceImports::Open(uint64_t region_id, uint64_t key,
                                           const DeviceExport& exported) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto at = opened_.find({region_id, key});
  if (at != opened_.end()) return at->second;
  PS_ASSIGN_OR_RETURN(OpenedExport opened, memory_->Open(exported));
  opened_.emplace(std::make_pair(region_id, key), opened);
  return opened;
}

}  // namespace ps::xfer::internal
