// internal::VerbsProvider: the RDMA transport as a provider. It opens this
// process's RDMA device when the Context starts (none: it offers and accepts
// nothing); registers every region with the device, fixing the region key's
// low 32 bits to the device's rkey so the NIC itself refuses a wrong key,
// and deregisters at Deregister so the NIC refuses the rkey from then on;
// offers a queue pair in the hello, and accepts a peer's offer when it is
// forced or comes from another host (same-host peers do better with shm).
// Thread-safety: internal/transport_provider.h.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/internal/transport_provider.h"
#include "core/verbs/verbs_device.h"
#include "core/verbs/verbs_target.h"

namespace ps::xfer::internal {

class VerbsProvider : public TransportProvider {
 public:
  TransportKind kind() const override { return TransportKind::kVerbs; }
  Status Start(const ProviderEnv& env,
               std::vector<HelloAcceptor::Listener>* listeners) override;
  std::string Describe() const override;
  void Stop() override;
  StatusOr<std::unique_ptr<LocalRegionState>> Register(
      const MemoryRegion& region) override;
  StatusOr<std::shared_ptr<RemoteRegionState>> Unpack(
      std::string_view key, bool present) const override;
  StatusOr<std::unique_ptr<PendingOffer>> Offer(
      const Selection& selection, proto::TransportOffer* offer) override;
  StatusOr<std::unique_ptr<Transport>> Connect(
      const Selection& selection, Dial& dial,
      std::unique_ptr<PendingOffer> offer,
      const proto::TransportAnswer* answer) override;
  std::function<void(UniqueFd)> Answer(const Greeting& greeting,
                                       const proto::TransportOffer* offer,
                                       proto::TransportAnswer* answer) override;

 private:
  ProviderEnv env_;
  // This process's RDMA device; null when it has none.
  std::shared_ptr<VerbsDevice> device_;
  std::mutex mu_;
  std::vector<std::shared_ptr<VerbsTarget>> targets_;  // guarded by mu_
};

}  // namespace ps::xfer::internal
