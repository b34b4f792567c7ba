#include "core/verbs/verbs_provider.h"

#include <glog/logging.h>

#include <mutex>
#include <vector>

#include "core/access.h"
#include "core/verbs/verbs.pb.h"
#include "core/verbs/verbs_device.h"
#include "core/verbs/verbs_remote_key.h"
#include "core/verbs/verbs_target.h"
#include "core/verbs/verbs_transport.h"

namespace ps::xfer::internal {
namespace {

// A region's registration with the device; dropping it makes the NIC
// refuse the region's rkey.
class VerbsRegionState : public LocalRegionState {
 public:
  explicit VerbsRegionState(std::unique_ptr<VerbsRegistration> mr)
      : rkey_(mr->rkey()), address_(mr->address()), mr_(std::move(mr)) {}

  std::optional<uint32_t> FixedKeyBits() const override { return rkey_; }
  StatusOr<std::optional<std::string>> Publish(uint64_t key) override {
    (void)key;  // its low half is the rkey already
    proto::VerbsRegionKey k;
    k.set_address(address_);
    return std::optional<std::string>(k.SerializeAsString());
  }
  void Withdraw() override {
    std::lock_guard<std::mutex> lock(mu_);
    mr_.reset();
  }

 private:
  const uint32_t rkey_;
  const uint64_t address_;
  std::mutex mu_;
  std::unique_ptr<VerbsRegistration> mr_;  // guarded by mu_
};

// A region the NIC cannot reach (device memory without GPUDirect RDMA): its
// key says so, and peers send its bytes to the target's CPU, which checks
// and copies them (VerbsTarget, STAGED_PUT / STAGED_GET). Deregister needs
// nothing here: the region table refuses the region once it is gone.
class VerbsStagedRegionState : public LocalRegionState {
 public:
  StatusOr<std::optional<std::string>> Publish(uint64_t key) override {
    (void)key;  // checked by the target's region table, not by the NIC
    proto::VerbsRegionKey k;
    k.set_staged(true);
    return std::optional<std::string>(k.SerializeAsString());
  }
  void Withdraw() override {}
};

// The queue pair offered in a hello.
struct VerbsOffer : PendingOffer {
  std::unique_ptr<QueuePair> qp;
};

class VerbsProvider : public TransportProvider {
 public:
  TransportKind kind() const override { return TransportKind::kVerbs; }
  // Opens the device, if there is one; the bootstrap socket of a
  // connection is the hello's TCP connection.
  Status Start(const ProviderEnv& env) override;
  std::string Describe() const override {
    return device_ != nullptr ? "verbs on " + device_->Describe() : "";
  }
  void Stop() override;
  StatusOr<std::unique_ptr<LocalRegionState>> Register(
      const MemoryRegion& region) override;
  // Register for device memory: GPUDirect, or staged where unavailable.
  StatusOr<std::unique_ptr<LocalRegionState>> RegisterDevice(
      const MemoryRegion& region);
  StatusOr<std::shared_ptr<RemoteRegionState>> Unpack(
      std::string_view key, bool present) const override;
  // A queue pair per connection, offered in the hello.
  Status Offer(Dial& dial) override;
  StatusOr<std::unique_ptr<Transport>> Connect(Dial& dial) override;
  std::function<void(net::UniqueFd)> Answer(const Greeting& greeting) override;

 private:
  ProviderEnv env_;
  // This process's RDMA device; null when it has none.
  std::shared_ptr<VerbsDevice> device_;
  std::mutex mu_;
  std::vector<std::shared_ptr<VerbsTarget>> targets_;  // guarded by mu_
  std::once_flag gpudirect_failure_logged_;
};

Status VerbsProvider::Start(const ProviderEnv& env) {
  env_ = env;
  const ContextOptions& o = *env_.options;
  auto device = VerbsDevice::Open({o.ib_device, o.ib_port, o.ib_gid_index});
  if (device.ok()) {
    device_ = std::move(device).value();
  } else if (device.status().Is(StatusCode::kNotFound)) {
    LOG(INFO) << "xfer context " << o.name
              << ": verbs transport off: " << device.status().message();
  } else {
    return device.status().WithContext("RDMA device");
  }
  return Status::OK();
}

void VerbsProvider::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  targets_.clear();  // each stops serving and joins its thread
}

StatusOr<std::unique_ptr<LocalRegionState>> VerbsProvider::Register(
    const MemoryRegion& region) {
  if (device_ == nullptr) return std::unique_ptr<LocalRegionState>();
  if (region.kind() != MemoryKind::kHost) return RegisterDevice(region);
  if (env_.options->verbs_stage_host_regions_for_testing &&
      !(region.access() & (kRemoteAtomic | kNotifyEvents))) {
    return std::unique_ptr<LocalRegionState>(
        std::make_unique<VerbsStagedRegionState>());
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<VerbsRegistration> mr,
                      device_->Register(region.data(), region.size(),
                                        region.access(), /*indexed=*/true));
  return std::unique_ptr<LocalRegionState>(
      std::make_unique<VerbsRegionState>(std::move(mr)));
}

// GPUDirect RDMA: the NIC registers GPU memory where the GPU driver lends
// it its pages (nvidia-peermem loaded); the region is then reached like
// host memory (data only: device regions hold no atomics or notify words).
// Not indexed: the CPU copies small local buffers (inline sends), which
// must never be device memory. Where the registration fails, the region is
// staged: peers' operations go to this process's CPU over the connection's
// bootstrap socket (verbs_target.h), slower but without nvidia-peermem.
StatusOr<std::unique_ptr<LocalRegionState>> VerbsProvider::RegisterDevice(
    const MemoryRegion& region) {
  StatusOr<std::unique_ptr<VerbsRegistration>> mr = device_->Register(
      region.data(), region.size(), region.access(), /*indexed=*/false);
  if (!mr.ok()) {
    std::call_once(gpudirect_failure_logged_, [&] {
      LOG(WARNING) << env_.options->name << ": no GPUDirect RDMA on "
                   << device_->name()
                   << ": verbs peers reach device regions staged by this "
                      "process's CPU, slowly (is nvidia-peermem loaded?): "
                   << mr.status();
    });
    return std::unique_ptr<LocalRegionState>(
        std::make_unique<VerbsStagedRegionState>());
  }
  return std::unique_ptr<LocalRegionState>(
      std::make_unique<VerbsRegionState>(std::move(mr).value()));
}

StatusOr<std::shared_ptr<RemoteRegionState>> VerbsProvider::Unpack(
    std::string_view key, bool present) const {
  proto::VerbsRegionKey k;
  if (present && !k.ParseFromArray(key.data(), static_cast<int>(key.size()))) {
    return InvalidArgument("malformed verbs key in a region descriptor");
  }
  return std::shared_ptr<RemoteRegionState>(
      std::make_shared<VerbsRemoteKey>(k.address(), k.staged()));
}

Status VerbsProvider::Offer(Dial& dial) {
  if (!dial.selection.allowed) return Status::OK();
  if (device_ == nullptr) {
    if (!dial.selection.forced) return Status::OK();
    return NotSupported("transport verbs was forced, but " +
                        env_.options->name +
                        " has no usable RDMA device (see the log line of its "
                        "context, and XFER_IB_DEV)");
  }
  // The peer accepts the queue pair (forced, or on another host) or not,
  // and then it is dropped.
  auto pending = std::make_unique<VerbsOffer>();
  PS_ASSIGN_OR_RETURN(pending->qp,
                      QueuePair::Create(device_, OriginQueuePairOptions()));
  dial.offer.set_offer(pending->qp->Info().SerializeAsString());
  dial.pending = std::move(pending);
  return Status::OK();
}

StatusOr<std::unique_ptr<Transport>> VerbsProvider::Connect(Dial& dial) {
  if (dial.pending == nullptr) return std::unique_ptr<Transport>();
  const DialedPeer& peer = *dial.peer;
  const proto::HelloReply& reply = *peer.reply;
  const proto::TransportAnswer* answer = dial.answer;
  if (answer == nullptr || answer->answer().empty()) {
    if (!dial.selection.forced) {
      if (answer != nullptr) dial.declined = answer->declined();
      return std::unique_ptr<Transport>();
    }
    return NotSupported("transport verbs was forced, but " + reply.name() +
                        " at " + peer.address + " declined: " +
                        (answer != nullptr ? answer->declined() : ""));
  }
  proto::QueuePairInfo peer_qp;
  if (!peer_qp.ParseFromString(answer->answer())) {
    return NetworkError("malformed verbs answer from " + reply.name() + " at " +
                        peer.address);
  }
  PS_ASSIGN_OR_RETURN(
      std::unique_ptr<VerbsTransport> transport,
      VerbsTransport::Create(
          device_, std::move(static_cast<VerbsOffer&>(*dial.pending).qp),
          peer_qp, std::move(*peer.fd), reply.name(), peer.peer_timeout));
  return std::unique_ptr<Transport>(std::move(transport));
}

std::function<void(net::UniqueFd)> VerbsProvider::Answer(
    const Greeting& greeting) {
  const proto::TransportOffer* offer = greeting.offer;
  proto::TransportAnswer* answer = greeting.answer;
  {
    // Forget targets whose peers are gone.
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(targets_, [](const auto& t) { return t->finished(); });
  }
  // An offer is taken when forced, or when the peer is on another host
  // (same-host peers do better with shm).
  if (offer == nullptr || (!offer->forced() && greeting.same_host)) return {};
  const std::string& name = env_.options->name;
  if (device_ == nullptr) {
    answer->set_declined(name + " has no usable RDMA device");
    return {};
  }
  proto::QueuePairInfo peer_qp;
  if (!peer_qp.ParseFromString(offer->offer())) {
    answer->set_declined(name + " got a malformed queue pair offer");
    return {};
  }
  auto accepted = VerbsTarget::Accept(
      device_, peer_qp, env_.regions, greeting.hello->name(),
      NotifyTargetFor(env_.notifications, greeting.hello->instance(),
                      env_.options->peer_timeout_ms),
      env_.device_memory);
  if (!accepted.ok()) {
    answer->set_declined(accepted.status().ToString());
    return {};
  }
  std::shared_ptr<VerbsTarget> target = std::move(accepted).value();
  answer->set_answer(target->Info().SerializeAsString());
  return [this, target, peer = greeting.hello->name()](net::UniqueFd fd) {
    VLOG(1) << env_.options->name << ": serving " << peer << " over verbs";
    target->Start(std::move(fd));
    std::lock_guard<std::mutex> lock(mu_);
    targets_.push_back(target);
  };
}

}  // namespace

std::shared_ptr<TransportProvider> MakeVerbsProvider() {
  return std::make_shared<VerbsProvider>();
}

}  // namespace ps::xfer::internal
