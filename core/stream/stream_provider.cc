#include "core/stream/stream_provider.h"

#include <glog/logging.h>

#include <mutex>
#include <vector>

#include "core/stream/stream_server.h"
#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {
namespace {

class StreamProvider : public TransportProvider {
 public:
  TransportKind kind() const override { return TransportKind::kTcp; }

  // The Context's TCP listener is the stream's: nothing to start.
  Status Start(const ProviderEnv& env) override {
    env_ = env;
    return Status::OK();
  }

  void Stop() override {
    std::lock_guard<std::mutex> lock(mu_);
    servers_.clear();  // each stops and joins its thread
  }

  StatusOr<std::unique_ptr<Transport>> Connect(Dial& dial) override {
    if (!dial.selection.allowed) return std::unique_ptr<Transport>();
    return std::unique_ptr<Transport>(std::make_unique<StreamTransport>(
        std::move(*dial.peer->fd), dial.peer->reply->name(),
        dial.peer->peer_timeout));
  }

  std::function<void(net::UniqueFd)> Answer(const Greeting& greeting) override {
    {
      // Forget servers whose peers are gone.
      std::lock_guard<std::mutex> lock(mu_);
      std::erase_if(servers_, [](const auto& s) { return s->finished(); });
    }
    return [this, name = greeting.hello->name()](net::UniqueFd fd) {
      VLOG(1) << env_.options->name << ": serving " << name << " over tcp";
      auto server = std::make_unique<StreamServer>(std::move(fd), env_.regions,
                                                   name, MapRegionHandler());
      std::lock_guard<std::mutex> lock(mu_);
      servers_.push_back(std::move(server));
    };
  }

 private:
  ProviderEnv env_;
  std::mutex mu_;
  std::vector<std::unique_ptr<StreamServer>> servers_;  // guarded by mu_
};

}  // namespace

std::shared_ptr<TransportProvider> MakeStreamProvider() {
  return std::make_shared<StreamProvider>();
}

}  // namespace ps::xfer::internal
