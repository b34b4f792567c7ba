#include "core/shm/shm_provider.h"

#include <glog/logging.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/shm/copy_lanes.h"
#include "core/shm/liveness_page.h"
#include "core/shm/remote_mapping.h"
#include "core/shm/shm_transport.h"
#include "core/stream/stream_server.h"
#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {
namespace {

// An allocated region's word in the liveness page: its key while peers may
// reach it, zero from Deregister on.
class ShmRegionState : public LocalRegionState {
 public:
  explicit ShmRegionState(std::shared_ptr<LivenessPage> page)
      : page_(std::move(page)) {}
  ~ShmRegionState() override { Withdraw(); }

  StatusOr<std::optional<std::string>> Publish(uint64_t key) override {
    PS_ASSIGN_OR_RETURN(slot_, page_->Acquire(key));
    published_.store(true);
    return std::optional<std::string>(std::string());  // mappable
  }
  void Withdraw() override {
    if (published_.exchange(false)) page_->Release(slot_);
  }
  uint32_t slot() const { return slot_; }

 private:
  const std::shared_ptr<LivenessPage> page_;
  uint32_t slot_ = 0;  // set by Publish, before peers can ask
  std::atomic<bool> published_{false};
};

class ShmProvider : public TransportProvider {
 public:
  TransportKind kind() const override { return TransportKind::kShm; }
  // Also listens on the Unix socket.
  Status Start(const ProviderEnv& env) override;
  // Publishes an allocated region in the liveness page.
  StatusOr<std::unique_ptr<LocalRegionState>> Register(
      const MemoryRegion& region) override;
  StatusOr<std::shared_ptr<RemoteRegionState>> Unpack(
      std::string_view key, bool present) const override;
  StatusOr<std::unique_ptr<Transport>> Connect(Dial& dial) override;
  std::function<void(net::UniqueFd)> Answer(const Greeting& greeting) override;
  void Stop() override;

 private:
  // Answers a same-host peer's kMapRegion: the region's memfd (read-only
  // unless peers may write) and the owner's truth about it.
  Status MapRegion(const wire::RequestHeader& request, wire::MapReply* reply,
                   int* memfd);
  // Moves the connection to the peer's Unix socket and maps its liveness
  // page; the hello's tcp connection stays open unless this succeeds.
  StatusOr<std::unique_ptr<Transport>> HandOver(
      const DialedPeer& peer, const proto::TransportAnswer* answer);

  ProviderEnv env_;
  std::shared_ptr<CopyLanes> lanes_;  // null with copy_threads 1
  std::string unix_name_;
  // Shared with the regions' states, which may outlive the Context.
  std::shared_ptr<LivenessPage> liveness_;
  std::mutex mu_;
  std::vector<std::unique_ptr<StreamServer>> servers_;  // guarded by mu_
};

Status ShmProvider::Start(const ProviderEnv& env) {
  env_ = env;
  const int copy_threads = env_.options->copy_threads;
  if (copy_threads < 1 || copy_threads > ContextOptions::kMaxCopyThreads) {
    return InvalidArgument("copy_threads is " + std::to_string(copy_threads) +
                           ", not 1 .. " +
                           std::to_string(ContextOptions::kMaxCopyThreads));
  }
  if (copy_threads > 1) lanes_ = std::make_shared<CopyLanes>(copy_threads - 1);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<LivenessPage> page,
                      LivenessPage::Create());
  liveness_ = std::move(page);
  char unix_name[64];
  std::snprintf(unix_name, sizeof(unix_name), "xfer-%016llx",
                static_cast<unsigned long long>(env_.instance));
  unix_name_ = unix_name;
  HelloAcceptor::Listener listener;
  PS_ASSIGN_OR_RETURN(listener.fd, net::ListenUnix(unix_name_));
  listener.same_host = true;
  env_.listeners->push_back(std::move(listener));
  return Status::OK();
}

void ShmProvider::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  servers_.clear();  // each stops and joins its thread
}

StatusOr<std::unique_ptr<LocalRegionState>> ShmProvider::Register(
    const MemoryRegion& region) {
  if (!region.memfd_backed()) return std::unique_ptr<LocalRegionState>();
  return std::unique_ptr<LocalRegionState>(
      std::make_unique<ShmRegionState>(liveness_));
}

StatusOr<std::shared_ptr<RemoteRegionState>> ShmProvider::Unpack(
    std::string_view key, bool present) const {
  (void)key;  // mapped on first use: the owner hands over the truth then
  return std::shared_ptr<RemoteRegionState>(
      std::make_shared<RemoteMapping>(present));
}

StatusOr<std::unique_ptr<Transport>> ShmProvider::Connect(Dial& dial) {
  const DialedPeer& peer = *dial.peer;
  const proto::HelloReply& reply = *peer.reply;
  if (!dial.selection.allowed) return std::unique_ptr<Transport>();
  if (!peer.same_host) {
    if (!dial.selection.forced) return std::unique_ptr<Transport>();
    return InvalidArgument("transport shm was forced, but " + reply.name() +
                           " at " + peer.address +
                           " runs on another host (or in another network or "
                           "IPC namespace)");
  }
  StatusOr<std::unique_ptr<Transport>> shm = HandOver(peer, dial.answer);
  if (shm.ok() || dial.selection.forced) return shm;
  // Same kernel and namespaces, yet the hand-over failed (a sandbox that
  // forbids the socket or the mapping): the hello's tcp connection is
  // still open, so the next provider carries it.
  dial.declined = "the shm hand-over failed (" + shm.status().ToString() + ")";
  return std::unique_ptr<Transport>();
}

StatusOr<std::unique_ptr<Transport>> ShmProvider::HandOver(
    const DialedPeer& peer, const proto::TransportAnswer* answer) {
  const proto::HelloReply& reply = *peer.reply;
  if (answer == nullptr || answer->answer().empty()) {
    return NetworkError(reply.name() + " at " + peer.address +
                        " named no same-host socket");
  }
  // Same host: switch to the peer's Unix socket, which can carry memfds.
  PS_ASSIGN_OR_RETURN(net::UniqueFd ufd,
                      net::ConnectUnix(answer->answer(), peer.deadline));
  PS_ASSIGN_OR_RETURN(proto::HelloReply again, peer.hello_again(ufd.get()));
  if (again.instance() != reply.instance()) {
    return PeerLost(reply.name() + " restarted during the connection");
  }
  auto stream = std::make_unique<StreamTransport>(std::move(ufd), reply.name(),
                                                  peer.peer_timeout, nullptr,
                                                  peer.link_counters);
  // Maps the peer's liveness page: the memfd hand-over itself.
  PS_ASSIGN_OR_RETURN(
      std::unique_ptr<ShmTransport> shm,
      ShmTransport::Create(std::move(stream), reply.name(), reply.instance(),
                           env_.instance, env_.options->peer_timeout_ms,
                           lanes_));
  peer.fd->Reset();  // the hello's tcp connection is not needed any more
  return std::unique_ptr<Transport>(std::move(shm));
}

std::function<void(net::UniqueFd)> ShmProvider::Answer(
    const Greeting& greeting) {
  {
    // Forget servers whose peers are gone.
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(servers_, [](const auto& s) { return s->finished(); });
  }
  if (!greeting.same_host_socket) {
    // Where a same-host connector switches.
    greeting.answer->set_answer(unix_name_);
    return {};
  }
  return [this, name = greeting.hello->name(),
          instance = greeting.hello->instance()](net::UniqueFd fd) {
    VLOG(1) << env_.options->name << ": serving " << name
            << " over unix socket";
    MapRegionHandler map = [this](const wire::RequestHeader& r,
                                  wire::MapReply* out, int* memfd) {
      return MapRegion(r, out, memfd);
    };
    auto server = std::make_unique<StreamServer>(
        std::move(fd), env_.regions, name, std::move(map), nullptr,
        NotifyTargetFor(env_.notifications, instance,
                        env_.options->peer_timeout_ms));
    std::lock_guard<std::mutex> lock(mu_);
    servers_.push_back(std::move(server));
  };
}

Status ShmProvider::MapRegion(const wire::RequestHeader& request,
                              wire::MapReply* reply, int* memfd) {
  const std::string& owner = env_.options->name;
  if (request.region_id == wire::kNotificationRingId) {
    if (request.instance != env_.instance) {
      return StaleDescriptor("notification queue of another instance of " +
                             owner);
    }
    *reply = wire::MapReply{env_.notifications->bytes(), kRemoteWrite, 0};
    *memfd = env_.notifications->memfd();
    return Status::OK();
  }
  if (request.region_id == 0) {  // the liveness page
    if (request.instance != env_.instance) {
      return StaleDescriptor("liveness page of another instance of " + owner);
    }
    *reply = wire::MapReply{LivenessPage::kBytes, kRemoteRead, 0};
    *memfd = liveness_->peer_fd();  // read-only
    return Status::OK();
  }
  PS_ASSIGN_OR_RETURN(
      auto region,
      env_.regions->Check(request.region_id, request.key, request.instance, 0,
                          0, 0, "a local peer"));
  const ShmRegionState* state =
      MemoryRegionAccess::Find<ShmRegionState>(*region);
  if (!region->memfd_backed() || state == nullptr) {
    return NotSupported("region " + std::to_string(region->id()) + " on " +
                        owner +
                        " is application memory; it cannot "
                        "be mapped");
  }
  *reply = wire::MapReply{MemoryRegionAccess::mapped_size(*region),
                          region->access(), state->slot()};
  // The mapping may be as large as the pages, but bounds checks use the
  // region's size.
  reply->size = region->size();
  // Read-only unless peers may write: the owner's O_RDWR memfd would let a
  // peer map a read-only region writable (the seals refuse that too).
  *memfd = MemoryRegionAccess::peer_memfd(*region);
  return Status::OK();
}

}  // namespace

std::shared_ptr<TransportProvider> MakeShmProvider() {
  return std::make_shared<ShmProvider>();
}

}  // namespace ps::xfer::internal
