#include "core/context.h"

#include <glog/logging.h>
#include <unistd.h>

#include <random>

#include "core/internal/context_impl.h"
#include "core/internal/cpu_latency_request.h"
#include "core/internal/hello.h"
#include "core/internal/notification_ring.h"
#include "core/internal/region_state.h"
#include "core/internal/sealed_memfd.h"
#include "core/internal/transport_registry.h"
#include "net/advertise.h"

namespace ps::xfer {

namespace internal {

uint64_t RandomNonZero() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) ^ rd();
  return v;
}

ContextImpl::ContextImpl(ContextOptions options)
    : options_(std::move(options)),
      instance_(RandomNonZero()),
      host_id_(HostIdentity()),
      regions_(options_.name, instance_),
      providers_(MakeTransportProviders()) {}

Status ContextImpl::Start() {
  PS_RETURN_IF_ERROR(RequireSecretFor(options_.listen_host, options_.secret,
                                      "the xfer listener of " + options_.name));
  if (options_.cpu_wakeup_latency_us >= 0) {
    PS_ASSIGN_OR_RETURN(
        cpu_latency_, CpuLatencyRequest::Hold(options_.cpu_wakeup_latency_us));
    LOG(INFO) << "xfer context " << options_.name
              << " holds CPU wake-ups within " << options_.cpu_wakeup_latency_us
              << " us (" << CpuLatencyRequest::kDevicePath << ")";
  }
  PS_ASSIGN_OR_RETURN(
      notifications_,
      NotificationRing::Create(options_.name, options_.notification_capacity));
  std::vector<HelloAcceptor::Listener> listeners(1);
  PS_ASSIGN_OR_RETURN(listeners[0].fd, net::ListenTcp(options_.listen_host,
                                                      options_.listen_port));
  PS_ASSIGN_OR_RETURN(uint16_t port, net::LocalPort(listeners[0].fd.get()));
  PS_ASSIGN_OR_RETURN(
      const std::string host,
      net::AdvertisedHost(options_.listen_host, options_.advertise_host));
  address_ = net::JoinHostPort(host, port);
  ProviderEnv env;
  env.options = &options_;
  env.instance = instance_;
  env.host_id = host_id_;
  env.regions = &regions_;
  env.notifications = notifications_;
  env.link_counters = link_counters_;
  env.device_memory = device_memory_;
  env.listeners = &listeners;
  std::string described;
  for (const auto& p : providers_) {
    PS_RETURN_IF_ERROR(p->Start(env));
    const std::string d = p->Describe();
    if (!d.empty()) described += ", " + d;
  }
  HelloAcceptor::Options ao;
  ao.name = options_.name;
  ao.secret = options_.secret;
  ao.hello_timeout_ms = options_.handshake_timeout_ms;
  ao.max_pending = options_.max_handshakes;
  PS_ASSIGN_OR_RETURN(
      acceptor_,
      HelloAcceptor::Start(std::move(ao), std::move(listeners),
                           [this](const proto::Hello& hello, bool same_host) {
                             return AnswerHello(hello, same_host);
                           }));
  LOG(INFO) << "xfer context " << options_.name << " listening on "
            << net::JoinHostPort(options_.listen_host, port)
            << ", advertised as " << address_ << " (instance " << std::hex
            << instance_ << std::dec
            << (options_.secret.empty() ? ", peers not authenticated"
                                        : ", peers must prove the secret")
            << ")" << described;
  return Status::OK();
}

ContextImpl::~ContextImpl() {
  acceptor_.reset();  // no new connections from here on
  for (const auto& p : providers_) p->Stop();
}

TransportProvider* ContextImpl::FindProvider(uint32_t id) const {
  for (const auto& p : providers_) {
    if (p->id() == id) return p.get();
  }
  return nullptr;
}

StatusOr<std::shared_ptr<MemoryRegion>> ContextImpl::AddRegion(
    std::unique_ptr<MemoryRegion> region) {
  region->id_ = next_region_id_.fetch_add(1);
  uint64_t key = RandomNonZero();
  std::vector<uint32_t> registered_with;  // provider ids, as the states
  for (const auto& p : providers_) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<LocalRegionState> state,
                        p->Register(*region));
    if (state == nullptr) continue;
    if (std::optional<uint32_t> low = state->FixedKeyBits()) {
      // A device checks its own key: make it the low half of the region
      // key, so that a peer with a wrong key presents a wrong device key.
      key = (key & ~uint64_t{0xffffffff}) | *low;
      if (key == 0) key = uint64_t{1} << 32 | *low;
    }
    region->transport_states_.push_back(std::move(state));
    registered_with.push_back(p->id());
  }
  region->key_ = key;
  proto::RegionDescriptor d;
  d.set_owner(options_.name);
  d.set_instance(instance_);
  d.set_host_id(host_id_);
  d.set_region_id(region->id_);
  d.set_key(region->key_);
  d.set_size(region->size_);
  d.set_access(region->access_);
  d.set_memory_kind(static_cast<uint32_t>(region->kind_));
  d.set_device(region->device_);
  for (size_t i = 0; i < registered_with.size(); ++i) {
    PS_ASSIGN_OR_RETURN(std::optional<std::string> packed,
                        region->transport_states_[i]->Publish(key));
    if (!packed.has_value()) continue;
    proto::TransportKey* k = d.add_transports();
    k->set_provider(registered_with[i]);
    k->set_key(std::move(*packed));
  }
  d.SerializeToString(&region->descriptor_);
  std::shared_ptr<MemoryRegion> shared(std::move(region));
  regions_.Insert(shared);
  return shared;
}

Status ContextImpl::RemoveRegion(uint64_t id) {
  PS_ASSIGN_OR_RETURN(auto removed, regions_.Remove(id));
  // Peers can no longer reach it through any provider, even while an
  // operation still holds the memory.
  for (const auto& state : MemoryRegionAccess::States(*removed)) {
    state->Withdraw();
  }
  return Status::OK();
}

Status ContextImpl::Fence() {
  std::vector<std::shared_ptr<Endpoint>> live;
  {
    std::lock_guard<std::mutex> lock(endpoints_mu_);
    for (auto& w : endpoints_) {
      if (auto ep = w.lock()) live.push_back(std::move(ep));
    }
  }
  Status first;
  for (auto& ep : live) {
    Status s = ep->Flush();
    if (!s.ok() && first.ok()) first = std::move(s);
  }
  return first;
}

}  // namespace internal

using internal::ContextImpl;

Context::Context(std::unique_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

StatusOr<std::unique_ptr<Context>> Context::Create(ContextOptions options) {
  if (options.name.empty()) return InvalidArgument("context name is empty");
  if (options.peer_timeout_ms <= 0) {
    return InvalidArgument("peer_timeout_ms must be positive");
  }
  if (options.handshake_timeout_ms <= 0 || options.max_handshakes == 0) {
    return InvalidArgument(
        "handshake_timeout_ms and max_handshakes must be positive");
  }
  if (options.cpu_wakeup_latency_us < -1) {
    return InvalidArgument("cpu_wakeup_latency_us is " +
                           std::to_string(options.cpu_wakeup_latency_us) +
                           "; give microseconds (0 or more) or -1 (none)");
  }
  auto impl = std::make_unique<ContextImpl>(std::move(options));
  PS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Context>(new Context(std::move(impl)));
}

const std::string& Context::name() const { return impl_->options_.name; }
std::string Context::address() const { return impl_->address_; }
uint64_t Context::instance() const { return impl_->instance_; }

LinkStats Context::link_stats() const { return impl_->link_counters_->Get(); }

namespace {

Status CheckAccessFlags(uint32_t access) {
  if ((access & ~kAllAccessFlags) == 0) return Status::OK();
  return InvalidArgument("access flags " + std::to_string(access) +
                         " have bits that are no flag of core/access.h");
}

}  // namespace

StatusOr<std::shared_ptr<MemoryRegion>> Context::Allocate(size_t length,
                                                          uint32_t access) {
  if (length == 0) return InvalidArgument("cannot allocate an empty region");
  PS_RETURN_IF_ERROR(CheckAccessFlags(access));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (length + page - 1) / page * page;
  // Sealed (core/internal/sealed_memfd.h): a same-host peer that maps the memfd
  // can neither resize it nor, unless the flags allow, write it.
  PS_ASSIGN_OR_RETURN(
      internal::SealedMemfd memfd,
      internal::SealedMemfd::Create(impl_->options_.name, mapped,
                                    internal::PeersMayWrite(access)));
  std::unique_ptr<MemoryRegion> r(new MemoryRegion());
  r->memfd_ = memfd.fd.Release();
  r->peer_memfd_ = memfd.read_only.Release();
  r->data_ = memfd.data;
  r->size_ = length;
  r->mapped_size_ = mapped;
  r->access_ = access;
  return impl_->AddRegion(std::move(r));
}

StatusOr<std::shared_ptr<MemoryRegion>> Context::Register(void* data,
                                                          size_t length,
                                                          uint32_t access) {
  if (data == nullptr || length == 0) {
    return InvalidArgument("cannot register an empty region");
  }
  PS_RETURN_IF_ERROR(CheckAccessFlags(access));
  std::unique_ptr<MemoryRegion> r(new MemoryRegion());
  r->data_ = data;
  r->size_ = length;
  r->access_ = access;
  return impl_->AddRegion(std::move(r));
}

namespace {

// Device regions carry data only (context.h says why), on a device
// `memory` can use.
Status CheckDeviceRegion(internal::DeviceMemory& memory, uint32_t access,
                         int device) {
  PS_RETURN_IF_ERROR(CheckAccessFlags(access));
  if (access & (kRemoteAtomic | kNotifyEvents)) {
    return NotSupported("device memory takes no atomics and no notify words (" +
                        AccessToString(access) +
                        "): keep those words in host memory");
  }
  return memory.Usable(device).WithContext("device memory on cuda:" +
                                           std::to_string(device));
}

}  // namespace

std::unique_ptr<MemoryRegion> internal::ContextImpl::DeviceRegion(
    void* data, size_t length, uint32_t access, int device) {
  std::unique_ptr<MemoryRegion> r(new MemoryRegion());
  r->data_ = data;
  r->size_ = length;
  r->access_ = access;
  r->kind_ = MemoryKind::kCudaDevice;
  r->device_ = device;
  r->device_memory_ = device_memory_;
  return r;
}

StatusOr<std::shared_ptr<MemoryRegion>> Context::AllocateDevice(size_t length,
                                                                uint32_t access,
                                                                int device) {
  if (length == 0) return InvalidArgument("cannot allocate an empty region");
  internal::DeviceMemory& memory = *impl_->device_memory_;
  PS_RETURN_IF_ERROR(CheckDeviceRegion(memory, access, device));
  PS_ASSIGN_OR_RETURN(void* data, memory.Allocate(device, length));
  std::unique_ptr<MemoryRegion> r =
      impl_->DeviceRegion(data, length, access, device);
  r->owns_device_memory_ = true;  // freed with the region from here on
  PS_RETURN_IF_ERROR(memory.Zero(device, data, length));
  return impl_->AddRegion(std::move(r));
}

StatusOr<std::shared_ptr<MemoryRegion>> Context::RegisterDevice(
    void* device_data, size_t length, uint32_t access, int device) {
  if (device_data == nullptr || length == 0) {
    return InvalidArgument("cannot register an empty region");
  }
  internal::DeviceMemory& memory = *impl_->device_memory_;
  PS_RETURN_IF_ERROR(CheckDeviceRegion(memory, access, device));
  if (memory.DeviceOf(device_data) != device) {
    return InvalidArgument("the memory to register is not on cuda:" +
                           std::to_string(device));
  }
  return impl_->AddRegion(
      impl_->DeviceRegion(device_data, length, access, device));
}

Status Context::Deregister(const MemoryRegion& region) {
  return impl_->RemoveRegion(region.id());
}

StatusOr<std::shared_ptr<Endpoint>> Context::Connect(
    const std::string& address) {
  return impl_->Connect(address);
}

Status Context::Fence() { return impl_->Fence(); }

StatusOr<Notification> Context::WaitNotification(
    std::chrono::microseconds timeout) {
  std::optional<Notification> n = impl_->notifications()->Wait(timeout);
  if (!n.has_value()) {
    return Timeout("no notification for " + impl_->options_.name + " within " +
                   std::to_string(timeout.count()) + " us");
  }
  return *n;
}

std::optional<Notification> Context::PollNotification() {
  return impl_->notifications()->Poll();
}

}  // namespace ps::xfer
