#include "core/context.h"

#include <glog/logging.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "core/descriptor.pb.h"
#include "core/hello.h"
#include "core/hello_acceptor.h"
#include "core/region_table.h"
#include "core/shm/liveness_page.h"
#include "core/shm/shm_transport.h"
#include "core/stream/stream_server.h"
#include "core/stream/stream_transport.h"
#include "net/connect.h"
#if PS_HAVE_VERBS
#include "core/verbs/verbs_device.h"
#include "core/verbs/verbs_target.h"
#include "core/verbs/verbs_transport.h"
#endif

namespace ps::xfer {

namespace internal {

using net::ConnectTcp;
using net::ConnectUnix;
using net::Deadline;
using net::DeadlineIn;
using net::ListenTcp;
using net::ListenUnix;
using net::LocalPort;
using net::UniqueFd;

// A random non-zero 64-bit number (keys and instance numbers must never be
// 0: 0 marks a free liveness slot and "no instance").
uint64_t RandomNonZero() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) ^ rd();
  return v;
}

class ContextImpl {
 public:
  explicit ContextImpl(ContextOptions options)
      : options_(std::move(options)),
        instance_(RandomNonZero()),
        host_id_(HostIdentity()),
        regions_(options_.name, instance_) {}
  ~ContextImpl();

  Status Start();

  const ContextOptions options_;
  const uint64_t instance_;
  const std::string host_id_;
  RegionTable regions_;
  std::unique_ptr<LivenessPage> liveness_;
  std::atomic<uint64_t> next_region_id_{1};
  std::string address_;

  std::mutex endpoints_mu_;
  std::vector<std::weak_ptr<Endpoint>> endpoints_;  // for Fence
#if PS_HAVE_VERBS
  // This process's RDMA device; null when it has none.
  std::shared_ptr<VerbsDevice> verbs_;
#endif

  StatusOr<std::shared_ptr<MemoryRegion>> AddRegion(
      std::unique_ptr<MemoryRegion> region);
  StatusOr<std::shared_ptr<Endpoint>> Connect(const std::string& address);

 private:
  // The reply to a peer's completed (and authenticated) hello, and what
  // serves its connection afterwards.
  HelloAcceptor::Answer AnswerHello(const proto::Hello& hello,
                                    bool same_host_socket);
  // Sends our hello on `fd`, runs the challenge-response when either side
  // has a secret, and returns the peer's real reply; all of it before
  // `deadline`.
  StatusOr<proto::HelloReply> Handshake(int fd, const proto::Hello& hello,
                                        const std::string& address,
                                        Deadline deadline) const;
  Status MapRegion(const wire::RequestHeader& request, wire::MapReply* reply,
                   int* memfd);
  proto::Hello MakeHello(std::string_view transport) const;

  std::string unix_name_;
  std::unique_ptr<HelloAcceptor> acceptor_;
  std::mutex servers_mu_;
  std::vector<std::unique_ptr<StreamServer>> servers_;
#if PS_HAVE_VERBS
  std::vector<std::shared_ptr<VerbsTarget>> verbs_targets_;  // servers_mu_
#endif
};

Status ContextImpl::Start() {
  PS_RETURN_IF_ERROR(RequireSecretFor(options_.listen_host, options_.secret,
                                      "the xfer listener of " + options_.name));
  PS_ASSIGN_OR_RETURN(liveness_, LivenessPage::Create());
  std::vector<HelloAcceptor::Listener> listeners(2);
  PS_ASSIGN_OR_RETURN(listeners[0].fd,
                      ListenTcp(options_.listen_host, options_.listen_port));
  PS_ASSIGN_OR_RETURN(uint16_t port, LocalPort(listeners[0].fd.get()));
  const std::string& host = options_.listen_host;
  address_ = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
             ":" + std::to_string(port);
  char unix_name[64];
  std::snprintf(unix_name, sizeof(unix_name), "xfer-%016llx",
                static_cast<unsigned long long>(instance_));
  unix_name_ = unix_name;
  PS_ASSIGN_OR_RETURN(listeners[1].fd, ListenUnix(unix_name_));
  listeners[1].same_host = true;
#if PS_HAVE_VERBS
  auto device = VerbsDevice::Open(VerbsDevice::FromEnvironment(
      {options_.ib_device, options_.ib_port, options_.ib_gid_index}));
  if (device.ok()) {
    verbs_ = std::move(device).value();
  } else if (device.status().Is(StatusCode::kNotFound)) {
    LOG(INFO) << "xfer context " << options_.name
              << ": verbs transport off: " << device.status().message();
  } else {
    return device.status().WithContext("RDMA device");
  }
#endif
  HelloAcceptor::Options ao;
  ao.name = options_.name;
  ao.secret = options_.secret;
  ao.hello_timeout_ms = options_.peer_timeout_ms;
  PS_ASSIGN_OR_RETURN(
      acceptor_,
      HelloAcceptor::Start(std::move(ao), std::move(listeners),
                           [this](const proto::Hello& hello, bool same_host) {
                             return AnswerHello(hello, same_host);
                           }));
  LOG(INFO) << "xfer context " << options_.name << " listening on " << address_
            << " (instance " << std::hex << instance_ << std::dec
            << (options_.secret.empty() ? ", peers not authenticated"
                                        : ", peers must prove the secret")
            << ")"
#if PS_HAVE_VERBS
            << (verbs_ ? ", verbs on " + verbs_->Describe() : "")
#endif
      ;
  return Status::OK();
}

ContextImpl::~ContextImpl() {
  acceptor_.reset();  // no new connections from here on
  std::lock_guard<std::mutex> lock(servers_mu_);
  servers_.clear();  // each stops and joins its thread
#if PS_HAVE_VERBS
  verbs_targets_.clear();
#endif
}

proto::Hello ContextImpl::MakeHello(std::string_view transport) const {
  proto::Hello hello;
  hello.set_name(options_.name);
  hello.set_instance(instance_);
  hello.set_host_id(host_id_);
  hello.set_pid(static_cast<uint32_t>(getpid()));
  hello.set_transport(std::string(transport));
  if (!options_.secret.empty()) hello.set_auth_nonce(NewNonce());
  return hello;
}

HelloAcceptor::Answer ContextImpl::AnswerHello(const proto::Hello& hello,
                                               bool same_host_socket) {
  HelloAcceptor::Answer answer;
  proto::HelloReply& reply = answer.reply;
  reply.set_name(options_.name);
  reply.set_instance(instance_);
  reply.set_host_id(host_id_);
  reply.set_pid(static_cast<uint32_t>(getpid()));
  reply.set_unix_socket(unix_name_);
  {
    // Forget servers whose peers are gone.
    std::lock_guard<std::mutex> lock(servers_mu_);
    std::erase_if(servers_, [](const auto& s) { return s->finished(); });
#if PS_HAVE_VERBS
    std::erase_if(verbs_targets_, [](const auto& t) { return t->finished(); });
#endif
  }
#if PS_HAVE_VERBS
  // A verbs offer is taken when forced, or when the peer is on another host
  // (same-host peers do better with shm).
  if (hello.has_verbs_qp() &&
      (hello.transport() == "verbs" || hello.host_id() != host_id_)) {
    if (verbs_ == nullptr) {
      reply.set_verbs_declined(options_.name + " has no usable RDMA device");
    } else {
      auto accepted = VerbsTarget::Accept(verbs_, hello.verbs_qp(), &regions_,
                                          hello.name());
      if (accepted.ok()) {
        std::shared_ptr<VerbsTarget> target = std::move(accepted).value();
        *reply.mutable_verbs_qp() = target->Info();
        answer.adopt = [this, target, name = hello.name()](UniqueFd fd) {
          VLOG(1) << options_.name << ": serving " << name << " over verbs";
          target->Start(std::move(fd));
          std::lock_guard<std::mutex> lock(servers_mu_);
          verbs_targets_.push_back(target);
        };
        return answer;
      }
      reply.set_verbs_declined(accepted.status().ToString());
    }
  }
#else
  if (hello.has_verbs_qp()) {
    reply.set_verbs_declined(options_.name + " was built without verbs");
  }
#endif
  answer.adopt = [this, same_host_socket, name = hello.name()](UniqueFd fd) {
    VLOG(1) << options_.name << ": serving " << name << " over "
            << (same_host_socket ? "unix socket" : "tcp");
    MapRegionHandler map;
    if (same_host_socket) {
      map = [this](const wire::RequestHeader& r, wire::MapReply* out,
                   int* memfd) { return MapRegion(r, out, memfd); };
    }
    auto server = std::make_unique<StreamServer>(std::move(fd), &regions_, name,
                                                 std::move(map));
    std::lock_guard<std::mutex> lock(servers_mu_);
    servers_.push_back(std::move(server));
  };
  return answer;
}

Status ContextImpl::MapRegion(const wire::RequestHeader& request,
                              wire::MapReply* reply, int* memfd) {
  if (request.region_id == 0) {  // the liveness page
    if (request.instance != instance_) {
      return StaleDescriptor("liveness page of another instance of " +
                             options_.name);
    }
    *reply = wire::MapReply{LivenessPage::kBytes, kRemoteRead, 0};
    *memfd = liveness_->peer_fd();  // read-only
    return Status::OK();
  }
  PS_ASSIGN_OR_RETURN(
      auto region, regions_.Check(request.region_id, request.key,
                                  request.instance, 0, 0, 0, "a local peer"));
  if (!region->memfd_backed()) {
    return NotSupported("region " + std::to_string(region->id()) + " on " +
                        options_.name +
                        " is application memory; it cannot "
                        "be mapped");
  }
  *reply = wire::MapReply{region->mapped_size_, region->access(),
                          region->state_slot_};
  // The mapping may be as large as the pages, but bounds checks use the
  // region's size.
  reply->size = region->size();
  // Read-only unless peers may write: the owner's O_RDWR memfd would let a
  // peer map a read-only region writable (the seals refuse that too).
  *memfd = region->peer_memfd();
  return Status::OK();
}

StatusOr<std::shared_ptr<MemoryRegion>> ContextImpl::AddRegion(
    std::unique_ptr<MemoryRegion> region) {
  region->id_ = next_region_id_.fetch_add(1);
  region->key_ = RandomNonZero();
  uint64_t verbs_address = 0;
#if PS_HAVE_VERBS
  if (verbs_ != nullptr) {
    PS_ASSIGN_OR_RETURN(
        std::unique_ptr<VerbsRegistration> mr,
        verbs_->Register(region->data_, region->size_, region->access_, true));
    // The NIC checks its rkey: make it the low half of the key, so that a
    // peer with a wrong key presents a wrong rkey.
    region->key_ = (region->key_ & ~uint64_t{0xffffffff}) | mr->rkey();
    if (region->key_ == 0) region->key_ = uint64_t{1} << 32 | mr->rkey();
    verbs_address = mr->address();
    region->verbs_registration_ = std::move(mr);
  }
#endif
  if (region->memfd_backed()) {
    PS_ASSIGN_OR_RETURN(region->state_slot_, liveness_->Acquire(region->key_));
  }
  proto::RegionDescriptor d;
  d.set_owner(options_.name);
  d.set_instance(instance_);
  d.set_host_id(host_id_);
  d.set_region_id(region->id_);
  d.set_key(region->key_);
  d.set_size(region->size_);
  d.set_access(region->access_);
  d.set_memfd_backed(region->memfd_backed());
  d.set_verbs_address(verbs_address);
  d.SerializeToString(&region->descriptor_);
  std::shared_ptr<MemoryRegion> shared(std::move(region));
  regions_.Insert(shared);
  return shared;
}

namespace {

TransportChoice EffectiveChoice(TransportChoice option) {
  if (option != TransportChoice::kAuto) return option;
  const char* env = std::getenv("XFER_TRANSPORT");
  if (env == nullptr) return option;
  if (std::strcmp(env, "tcp") == 0) return TransportChoice::kTcp;
  if (std::strcmp(env, "shm") == 0) return TransportChoice::kShm;
  if (std::strcmp(env, "verbs") == 0) return TransportChoice::kVerbs;
  if (std::strcmp(env, "auto") != 0 && env[0] != '\0') {
    LOG(WARNING) << "XFER_TRANSPORT=" << env
                 << " is not tcp, shm, verbs or auto; choosing automatically";
  }
  return TransportChoice::kAuto;
}

}  // namespace

StatusOr<proto::HelloReply> ContextImpl::Handshake(int fd,
                                                   const proto::Hello& hello,
                                                   const std::string& address,
                                                   Deadline deadline) const {
  auto fail = [&address](const Status& s) {
    return s.WithContext("hello with " + address);
  };
  // The listener says why it refuses, with a status code (unauthenticated
  // for a missing or wrong proof).
  auto refused = [&address](const proto::HelloReply& r) {
    const bool known = r.error_code() > 0 &&
                       r.error_code() <= static_cast<uint32_t>(kLastStatusCode);
    return Status(
        known ? static_cast<StatusCode>(r.error_code()) : StatusCode::kNetwork,
        address + " refused the connection: " + r.error());
  };
  Status s = SendMessage(fd, hello, deadline);
  if (!s.ok()) return fail(s);
  proto::HelloReply reply;
  s = RecvMessage(fd, &reply, deadline);
  if (!s.ok()) return fail(s);
  if (!reply.error().empty()) return refused(reply);
  const bool challenged = !reply.auth_nonce().empty();
  if (options_.secret.empty()) {
    if (challenged) {
      return Unauthenticated(
          reply.name() + " at " + address +
          " requires the cluster secret, and " + options_.name +
          " has none (--cluster_secret_file or $PS_CLUSTER_SECRET_FILE)");
    }
    return reply;
  }
  if (!challenged) {
    return Unauthenticated(reply.name() + " at " + address +
                           " does not authenticate (it has no cluster "
                           "secret): " +
                           options_.name + " will not trust it");
  }
  if (!options_.secret.Verify(kXferAuthProtocol, AuthRole::kAcceptor,
                              reply.auth_nonce(), hello.auth_nonce(),
                              reply.auth_proof())) {
    return Unauthenticated(reply.name() + " at " + address +
                           " failed to prove the cluster secret (a "
                           "different secret?)");
  }
  proto::AuthProof proof;
  proof.set_proof(options_.secret.Prove(kXferAuthProtocol, AuthRole::kConnector,
                                        reply.auth_nonce(),
                                        hello.auth_nonce()));
  s = SendMessage(fd, proof, deadline);
  if (!s.ok()) return fail(s);
  reply.Clear();
  s = RecvMessage(fd, &reply, deadline);
  if (!s.ok()) return fail(s);
  if (!reply.error().empty()) return refused(reply);
  return reply;
}

StatusOr<std::shared_ptr<Endpoint>> ContextImpl::Connect(
    const std::string& address) {
  const auto timeout = std::chrono::milliseconds(options_.peer_timeout_ms);
  TransportChoice choice = EffectiveChoice(options_.transport);
  const bool want_shm =
      choice == TransportChoice::kAuto || choice == TransportChoice::kShm;
  proto::Hello hello = MakeHello(want_shm ? "shm" : "tcp");
#if PS_HAVE_VERBS
  // Offer a queue pair; the peer accepts it (forced, or on another host) or
  // not, and then it is dropped.
  std::unique_ptr<QueuePair> offer;
  if (verbs_ != nullptr &&
      (choice == TransportChoice::kAuto || choice == TransportChoice::kVerbs)) {
    PS_ASSIGN_OR_RETURN(offer,
                        QueuePair::Create(verbs_, OriginQueuePairOptions()));
    *hello.mutable_verbs_qp() = offer->Info();
    if (choice == TransportChoice::kVerbs) hello.set_transport("verbs");
  }
  const bool have_device = verbs_ != nullptr;
#else
  const bool have_device = false;
#endif
  if (choice == TransportChoice::kVerbs && !have_device) {
    return NotSupported("transport verbs was forced, but " + options_.name +
                        " has no usable RDMA device (see the log line of its "
                        "context, and XFER_IB_DEV)");
  }
  // One deadline for connecting and every step of the hello, also on the
  // same-host socket below: a silent or slow listener fails Connect in time.
  const Deadline deadline = DeadlineIn(options_.peer_timeout_ms);
  PS_ASSIGN_OR_RETURN(UniqueFd fd,
                      ConnectTcp(address, options_.peer_timeout_ms));
  PS_ASSIGN_OR_RETURN(proto::HelloReply reply,
                      Handshake(fd.get(), hello, address, deadline));
  const bool same_host = reply.host_id() == host_id_;
  if (choice == TransportChoice::kVerbs && !reply.has_verbs_qp()) {
    return NotSupported("transport verbs was forced, but " + reply.name() +
                        " at " + address +
                        " declined: " + reply.verbs_declined());
  }
  if (choice == TransportChoice::kShm && !same_host) {
    return InvalidArgument("transport shm was forced, but " + reply.name() +
                           " at " + address + " runs on another host");
  }

  std::unique_ptr<Transport> transport;
  TransportKind kind = TransportKind::kTcp;
#if PS_HAVE_VERBS
  if (reply.has_verbs_qp() && offer != nullptr) {
    PS_ASSIGN_OR_RETURN(
        transport,
        VerbsTransport::Create(verbs_, std::move(offer), reply.verbs_qp(),
                               std::move(fd), reply.name(), timeout));
    kind = TransportKind::kVerbs;
  } else
#endif
      if (want_shm && same_host) {
    // Same host: switch to the peer's Unix socket, which can carry memfds.
    PS_ASSIGN_OR_RETURN(UniqueFd ufd,
                        ConnectUnix(reply.unix_socket(), deadline));
    PS_ASSIGN_OR_RETURN(
        proto::HelloReply again,
        Handshake(ufd.get(), MakeHello("shm"), address, deadline));
    if (again.instance() != reply.instance()) {
      return PeerLost(reply.name() + " restarted during the connection");
    }
    fd.Reset();
    auto stream = std::make_unique<StreamTransport>(std::move(ufd),
                                                    reply.name(), timeout);
    PS_ASSIGN_OR_RETURN(transport,
                        ShmTransport::Create(std::move(stream), reply.name(),
                                             reply.instance()));
    kind = TransportKind::kShm;
  } else {
    transport =
        std::make_unique<StreamTransport>(std::move(fd), reply.name(), timeout);
  }
  std::shared_ptr<Endpoint> ep(
      new Endpoint(reply.name(), reply.instance(), kind, std::move(transport)));
  LOG(INFO) << options_.name << " connected to " << reply.name() << " at "
            << address << " over " << TransportName(kind);
  std::lock_guard<std::mutex> lock(endpoints_mu_);
  std::erase_if(endpoints_, [](const auto& w) { return w.expired(); });
  endpoints_.push_back(ep);
  return ep;
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
  auto impl = std::make_unique<ContextImpl>(std::move(options));
  PS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Context>(new Context(std::move(impl)));
}

const std::string& Context::name() const { return impl_->options_.name; }
std::string Context::address() const { return impl_->address_; }
uint64_t Context::instance() const { return impl_->instance_; }

StatusOr<std::shared_ptr<MemoryRegion>> Context::Allocate(size_t length,
                                                          uint32_t access) {
  if (length == 0) return InvalidArgument("cannot allocate an empty region");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (length + page - 1) / page * page;
  // Sealed (core/shm/sealed_memfd.h): a same-host peer that maps the memfd
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
  std::unique_ptr<MemoryRegion> r(new MemoryRegion());
  r->data_ = data;
  r->size_ = length;
  r->access_ = access;
  return impl_->AddRegion(std::move(r));
}

Status Context::Deregister(const MemoryRegion& region) {
  PS_ASSIGN_OR_RETURN(auto removed, impl_->regions_.Remove(region.id()));
  if (removed->memfd_backed()) impl_->liveness_->Release(removed->state_slot_);
  removed->verbs_registration_.reset();  // the NIC refuses the rkey from now
  return Status::OK();
}

StatusOr<std::shared_ptr<Endpoint>> Context::Connect(
    const std::string& address) {
  return impl_->Connect(address);
}

Status Context::Fence() {
  std::vector<std::shared_ptr<Endpoint>> live;
  {
    std::lock_guard<std::mutex> lock(impl_->endpoints_mu_);
    for (auto& w : impl_->endpoints_) {
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

}  // namespace ps::xfer
