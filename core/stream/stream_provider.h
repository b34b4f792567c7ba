// internal::StreamProvider: the tcp transport as a provider. It carries
// whatever no other provider takes: the connection of the hello goes on as
// a StreamTransport at the connector and a StreamServer at the listener.
// Regions need nothing from it (the server checks every request against
// the region table). Thread-safety: internal/transport_provider.h.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/internal/transport_provider.h"
#include "core/stream/stream_server.h"

namespace ps::xfer::internal {

class StreamProvider : public TransportProvider {
 public:
  TransportKind kind() const override { return TransportKind::kTcp; }
  Status Start(const ProviderEnv& env,
               std::vector<HelloAcceptor::Listener>* listeners) override;
  void Stop() override;
  StatusOr<std::unique_ptr<Transport>> Connect(
      const Selection& selection, Dial& dial,
      std::unique_ptr<PendingOffer> offer,
      const proto::TransportAnswer* answer) override;
  std::function<void(UniqueFd)> Answer(const Greeting& greeting,
                                       const proto::TransportOffer* offer,
                                       proto::TransportAnswer* answer) override;

 private:
  ProviderEnv env_;
  std::mutex mu_;
  std::vector<std::unique_ptr<StreamServer>> servers_;  // guarded by mu_
};

}  // namespace ps::xfer::internal
