#include "core/shm/shm_provider.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/device/device_memory.h"
#include "core/shm/copy_lanes.h"
#include "core/shm/device_ipc_key.h"
#include "core/shm/liveness_page.h"
#include "core/shm/remote_mapping.h"
#include "core/shm/shm_transport.h"
#include "core/stream/stream_server.h"
#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {
namespace {

// An allocated region's word in the liveness page: its key while peers may
// reach it, zero from Deregister on. `peer_key` is what the descriptor
// carries for this provider: empty for a memfd, the CUDA IPC export for
// device memory (device_ipc_key.h).
class ShmRegionState : public LocalRegionState {
 public:
  ShmRegionState(std::shared_ptr<LivenessPage> page, std::string peer_key)
      : page_(std::move(page)), peer_key_(std::move(peer_key)) {}
  ~ShmRegionState() override { Withdraw(); }

  StatusOr<std::optional<std::string>> Publish(uint64_t key) override {
    PS_ASSIGN_OR_RETURN(slot_, page_->Acquire(key));
    published_.store(true);
    return std::optional<std::string>(peer_key_);
  }
  void Withdraw() override {
    if (published_.exchange(false)) page_->Release(slot_);
  }
  uint32_t slot() const { return slot_; }

 private:
  const std::shared_ptr<LivenessPage> page_;
  const std::string peer_key_;
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
  // A device region exported over CUDA IPC, or null (then it is streamed).
  std::unique_ptr<LocalRegionState> ExportDevice(const MemoryRegion& region);
  // Answers a same-host peer's kMapRegion: the region's memfd (read-only
  // unless peers may write) and the owner's truth about it. A device
  // region the peer is about to open over CUDA IPC joins `opened`, which
  // the connection keeps until it ends (the deferred free, see Answer).
  Status MapRegion(const wire::RequestHeader& request, wire::MapReply* reply,
                   int* memfd,
                   std::vector<std::shared_ptr<MemoryRegion>>* opened);
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
  std::once_flag export_failure_logged_;
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
  if (region.kind() == MemoryKind::kCudaDevice) return ExportDevice(region);
  if (!region.memfd_backed()) return std::unique_ptr<LocalRegionState>();
  return std::unique_ptr<LocalRegionState>(
      std::make_unique<ShmRegionState>(liveness_, std::string()));
}

// Only memory the Context allocated is exported: CUDA leaves freeing an
// allocation undefined while another process has it open, and only that
// memory's free can wait for the importers (MapRegion pins it). The
// application frees RegisterDevice's memory whenever it likes after
// Deregister, so that is staged by this process's CPU as before.
std::unique_ptr<LocalRegionState> ShmProvider::ExportDevice(
    const MemoryRegion& region) {
  if (!MemoryRegionAccess::owns_device_memory(region)) return nullptr;
  StatusOr<DeviceExport> exported =
      MemoryRegionAccess::device_memory(region)->Export(
          region.device(), region.data(), region.size());
  if (!exported.ok()) {
    std::call_once(export_failure_logged_, [&] {
      LOG(WARNING) << env_.options->name
                   << ": same-host peers reach device regions through this "
                      "process's CPU: CUDA IPC export failed: "
                   << exported.status();
    });
    return nullptr;
  }
  return std::make_unique<ShmRegionState>(liveness_,
                                          PackDeviceIpcKey(*exported));
}

StatusOr<std::shared_ptr<RemoteRegionState>> ShmProvider::Unpack(
    std::string_view key, bool present) const {
  // Mapped on first use: the owner hands over the truth then. An empty key
  // is a memfd; anything else must be a device region's export.
  if (!present || key.empty()) {
    return std::shared_ptr<RemoteRegionState>(
        std::make_shared<RemoteMapping>(present));
  }
  PS_ASSIGN_OR_RETURN(DeviceExport exported, ParseDeviceIpcKey(key));
  return std::shared_ptr<RemoteRegionState>(
      std::make_shared<RemoteMapping>(false, exported));
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
                           env_.instance, env_.options->peer_timeout_ms, lanes_,
                           env_.device_memory));
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
    // The device regions this peer opened over CUDA IPC stay allocated
    // while the connection's server lives (it ends after the peer closed
    // its socket, which it does after closing its handles: device_imports.h),
    // even when deregistered and released meanwhile. Only the server's
    // thread calls the handler.
    auto opened =
        std::make_shared<std::vector<std::shared_ptr<MemoryRegion>>>();
    MapRegionHandler map = [this, opened](const wire::RequestHeader& r,
                                          wire::MapReply* out, int* memfd) {
      return MapRegion(r, out, memfd, opened.get());
    };
    auto server = std::make_unique<StreamServer>(
        std::move(fd), env_.regions, name, std::move(map), nullptr,
        NotifyTargetFor(env_.notifications, instance,
                        env_.options->peer_timeout_ms));
    std::lock_guard<std::mutex> lock(mu_);
    servers_.push_back(std::move(server));
  };
}

Status ShmProvider::MapRegion(
    const wire::RequestHeader& request, wire::MapReply* reply, int* memfd,
    std::vector<std::shared_ptr<MemoryRegion>>* opened) {
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
  if (region->kind() == MemoryKind::kCudaDevice && state != nullptr) {
    *reply = wire::MapReply{region->size(), region->access(), state->slot()};
    // A reply carries a descriptor; a device region has none to give, so it
    // is the liveness page's again (read-only, the peer's already).
    *memfd = liveness_->peer_fd();
    if (std::find(opened->begin(), opened->end(), region) == opened->end()) {
      opened->push_back(std::move(region));
    }
    return Status::OK();
  }
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
