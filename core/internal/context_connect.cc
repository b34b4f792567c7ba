// The connector's side of the hello (internal/context_impl.h): the offers
// of every provider, the challenge-response, and the first provider that
// carries the connection.
#include <glog/logging.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include "core/internal/context_impl.h"
#include "core/internal/hello.h"
#include "core/internal/transport_registry.h"
#include "net/handshake_retry.h"

namespace ps::xfer::internal {

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
  const std::optional<TransportKind> forced = ForcedKind(options_.transport);
  if (forced.has_value() && FindProvider(ProviderId(*forced)) == nullptr) {
    return NotSupported("transport " + std::string(TransportName(*forced)) +
                        " was forced, but " + options_.name +
                        " was built without it");
  }
  const HelloIdentity me = Identity();
  proto::Hello hello = MakeHello(me);
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
  // A listener that gave a slow hello up is dialed again (lossy paths).
  const net::Deadline deadline = net::DeadlineIn(options_.peer_timeout_ms);
  net::UniqueFd fd;
  proto::HelloReply reply;
  PS_RETURN_IF_ERROR(net::RetryDroppedHandshake(
      options_.name + ": xfer connection to " + address, deadline,
      [&](net::Deadline until) -> Status {
        PS_ASSIGN_OR_RETURN(fd, net::ConnectTcp(address, net::MsUntil(until)));
        PS_ASSIGN_OR_RETURN(reply,
                            Handshake(me, fd.get(), hello, address, until));
        return Status::OK();
      }));
  DialedPeer peer;
  peer.address = address;
  peer.reply = &reply;
  peer.same_host = reply.host_id() == host_id_;
  peer.fd = &fd;
  peer.deadline = deadline;
  peer.peer_timeout = std::chrono::milliseconds(options_.peer_timeout_ms);
  peer.link_counters = link_counters_;
  peer.hello_again = [&me, &address, deadline](int other) {
    return Handshake(me, other, MakeHello(me), address, deadline);
  };
  peer.redial = [me, address](const RedialOffer& offer,
                              net::Deadline until) -> StatusOr<Redialed> {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - net::Deadline::clock::now());
    if (left.count() <= 0) return Timeout("no time left to dial " + address);
    Redialed r;
    PS_ASSIGN_OR_RETURN(r.fd, net::ConnectTcp(address, left.count()));
    proto::Hello hello = MakeHello(me);
    *hello.add_offers() = offer(hello);
    StatusOr<proto::HelloReply> reply =
        Handshake(me, r.fd.get(), hello, address, until);
    if (!reply.ok()) {
      // Given up: close with a reset, so that the kernel does not go on
      // delivering this hello to the listener after we have moved on.
      net::CloseWithReset(r.fd);
      return reply.status();
    }
    r.reply = std::move(*reply);
    return r;
  };
  std::unique_ptr<Transport> transport;
  std::shared_ptr<TransportProvider> carrier;
  std::string why;  // of the choice, for the log line
  for (size_t i = 0; i < providers_.size() && transport == nullptr; ++i) {
    const auto& p = providers_[i];
    dials[i].peer = &peer;
    dials[i].answer = FindAnswer(reply, p->id());
    PS_ASSIGN_OR_RETURN(transport, p->Connect(dials[i]));
    if (transport != nullptr) carrier = p;
    if (!dials[i].declined.empty()) {
      why += (why.empty() ? "" : "; ") + std::string(TransportName(p->kind())) +
             " declined: " + dials[i].declined;
    }
  }
  if (transport == nullptr) {
    return Internal("no transport carries the connection to " + address);
  }
  const TransportKind kind = carrier->kind();
  if (forced.has_value()) {
    why = "forced";
  } else if (why.empty()) {
    why = peer.same_host ? "same kernel and namespaces"
                         : "another host, container or network namespace";
  }
  std::shared_ptr<Endpoint> ep(new Endpoint(reply.name(), reply.instance(),
                                            std::move(carrier),
                                            std::move(transport)));
  if (options_.device_buffers) ep->device_buffers_ = device_memory_;
  LOG(INFO) << options_.name << " connected to " << reply.name() << " at "
            << address << " over " << TransportName(kind) << " (" << why << ")";
  std::lock_guard<std::mutex> lock(endpoints_mu_);
  std::erase_if(endpoints_, [](const auto& w) { return w.expired(); });
  endpoints_.push_back(ep);
  return ep;
}

}  // namespace ps::xfer::internal
