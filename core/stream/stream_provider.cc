#include "core/stream/stream_provider.h"

#include <glog/logging.h>

#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {

Status StreamProvider::Start(const ProviderEnv& env,
                             std::vector<HelloAcceptor::Listener>* listeners) {
  (void)listeners;  // the Context's TCP listener is the stream's
  env_ = env;
  return Status::OK();
}

void StreamProvider::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  servers_.clear();  // each stops and joins its thread
}

StatusOr<std::unique_ptr<Transport>> StreamProvider::Connect(
    const Selection& selection, Dial& dial, std::unique_ptr<PendingOffer> offer,
    const proto::TransportAnswer* answer) {
  (void)offer;
  (void)answer;
  if (!selection.allowed) return std::unique_ptr<Transport>();
  return std::unique_ptr<Transport>(std::make_unique<StreamTransport>(
      std::move(*dial.fd), dial.reply->name(), dial.peer_timeout));
}

std::function<void(UniqueFd)> StreamProvider::Answer(
    const Greeting& greeting, const proto::TransportOffer* offer,
    proto::TransportAnswer* answer) {
  (void)offer;
  (void)answer;
  {
    // Forget servers whose peers are gone.
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(servers_, [](const auto& s) { return s->finished(); });
  }
  return [this, name = greeting.hello->name()](UniqueFd fd) {
    VLOG(1) << env_.options->name << ": serving " << name << " over tcp";
    auto server = std::make_unique<StreamServer>(std::move(fd), env_.regions,
                                                 name, MapRegionHandler());
    std::lock_guard<std::mutex> lock(mu_);
    servers_.push_back(std::move(server));
  };
}

}  // namespace ps::xfer::internal
