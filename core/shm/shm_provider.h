// internal::ShmProvider: the same-host transport as a provider. It listens
// on an abstract Unix socket, which carries memfds; publishes each
// allocated (memfd-backed) region in its liveness page; answers every hello
// on TCP with the socket's name; and carries a connection when both sides
// share a host: the connector switches to the Unix socket and maps the
// peer's regions (ShmTransport), the listener serves that socket with a
// StreamServer that also hands out memfds. Thread-safety:
// internal/transport_provider.h.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/internal/transport_provider.h"
#include "core/shm/liveness_page.h"
#include "core/stream/stream_server.h"

namespace ps::xfer::internal {

class ShmProvider : public TransportProvider {
 public:
  TransportKind kind() const override { return TransportKind::kShm; }
  Status Start(const ProviderEnv& env,
               std::vector<HelloAcceptor::Listener>* listeners) override;
  void Stop() override;
  StatusOr<std::unique_ptr<LocalRegionState>> Register(
      const MemoryRegion& region) override;
  StatusOr<std::shared_ptr<RemoteRegionState>> Unpack(
      std::string_view key, bool present) const override;
  StatusOr<std::unique_ptr<Transport>> Connect(
      const Selection& selection, Dial& dial,
      std::unique_ptr<PendingOffer> offer,
      const proto::TransportAnswer* answer) override;
  std::function<void(UniqueFd)> Answer(const Greeting& greeting,
                                       const proto::TransportOffer* offer,
                                       proto::TransportAnswer* answer) override;

 private:
  // Answers a same-host peer's kMapRegion: the region's memfd (read-only
  // unless peers may write) and the owner's truth about it.
  Status MapRegion(const wire::RequestHeader& request, wire::MapReply* reply,
                   int* memfd);

  ProviderEnv env_;
  std::string unix_name_;
  // Shared with the regions' states, which may outlive the Context.
  std::shared_ptr<LivenessPage> liveness_;
  std::mutex mu_;
  std::vector<std::unique_ptr<StreamServer>> servers_;  // guarded by mu_
};

}  // namespace ps::xfer::internal
