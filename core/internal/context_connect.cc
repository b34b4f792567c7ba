// The connector's side of the hello (internal/context_impl.h): the offers
// of every provider, the challenge-response, and the first provider that
// carries the connection.
#include <glog/logging.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include "core/internal/context_impl.h"
#include "core/internal/hello.h"
#include "core/internal/transport_registry.h"

namespace ps::xfer::internal {

proto::Hello ContextImpl::MakeHello() const {
  proto::Hello hello;
  hello.set_name(options_.name);
  hello.set_instance(instance_);
  hello.set_host_id(host_id_);
  hello.set_pid(static_cast<uint32_t>(getpid()));
  if (!options_.secret.empty()) hello.set_auth_nonce(NewNonce());
  return hello;
}

StatusOr<proto::HelloReply> ContextImpl::Handshake(
    int fd, const proto::Hello& hello, const std::string& address,
    net::Deadline deadline) const {
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

namespace {

const proto::TransportAnswer* FindAnswer(const proto::HelloReply& reply,
                                         uint32_t provider) {
  for (const proto::TransportAnswer& a : reply.answers()) {
    if (a.provider() == provider) return &a;
  }
  return nullptr;
}

}  // namespace

StatusOr<std::shared_ptr<Endpoint>> ContextImpl::Connect(
    const std::string& address) {
  const std::optional<TransportKind> forced =
      ForcedKind(EffectiveChoice(options_.transport));
  if (forced.has_value() && FindProvider(ProviderId(*forced)) == nullptr) {
    return NotSupported("transport " + std::string(TransportName(*forced)) +
                        " was forced, but " + options_.name +
                        " was built without it");
  }
  proto::Hello hello = MakeHello();
  std::vector<Dial> dials(providers_.size());
  for (size_t i = 0; i < providers_.size(); ++i) {
    const auto& p = providers_[i];
    Dial& dial = dials[i];
    dial.selection.forced = forced == p->kind();
    dial.selection.allowed = !forced.has_value() || dial.selection.forced;
    PS_RETURN_IF_ERROR(p->Offer(dial));
    if (dial.pending != nullptr) {
      dial.offer.set_provider(p->id());
      dial.offer.set_name(std::string(TransportName(p->kind())));
      dial.offer.set_forced(dial.selection.forced);
      *hello.add_offers() = dial.offer;
    }
  }
  // One deadline for connecting and every step of the hello, also on a
  // provider's own connection (hello_again): a silent or slow listener
  // fails Connect in time.
  const net::Deadline deadline = net::DeadlineIn(options_.peer_timeout_ms);
  PS_ASSIGN_OR_RETURN(net::UniqueFd fd,
                      net::ConnectTcp(address, options_.peer_timeout_ms));
  PS_ASSIGN_OR_RETURN(proto::HelloReply reply,
                      Handshake(fd.get(), hello, address, deadline));
  DialedPeer peer;
  peer.address = address;
  peer.reply = &reply;
  peer.same_host = reply.host_id() == host_id_;
  peer.fd = &fd;
  peer.deadline = deadline;
  peer.peer_timeout = std::chrono::milliseconds(options_.peer_timeout_ms);
  peer.hello_again = [this, &address, deadline](int other) {
    return Handshake(other, MakeHello(), address, deadline);
  };
  std::unique_ptr<Transport> transport;
  std::shared_ptr<TransportProvider> carrier;
  for (size_t i = 0; i < providers_.size() && transport == nullptr; ++i) {
    const auto& p = providers_[i];
    dials[i].peer = &peer;
    dials[i].answer = FindAnswer(reply, p->id());
    PS_ASSIGN_OR_RETURN(transport, p->Connect(dials[i]));
    if (transport != nullptr) carrier = p;
  }
  if (transport == nullptr) {
    return Internal("no transport carries the connection to " + address);
  }
  const TransportKind kind = carrier->kind();
  std::shared_ptr<Endpoint> ep(new Endpoint(reply.name(), reply.instance(),
                                            std::move(carrier),
                                            std::move(transport)));
  LOG(INFO) << options_.name << " connected to " << reply.name() << " at "
            << address << " over " << TransportName(kind);
  std::lock_guard<std::mutex> lock(endpoints_mu_);
  std::erase_if(endpoints_, [](const auto& w) { return w.expired(); });
  endpoints_.push_back(ep);
  return ep;
}

}  // namespace ps::xfer::internal
