#include "server/control_service.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/socket.h>

#include <system_error>

#include "net/advertise.h"
#include "net/connect.h"
#include "net/transfer.h"
#include "protocol/control_channel.h"

namespace ps::server {
namespace {

using net::Deadline;
using net::DeadlineIn;

}  // namespace

struct ControlService::Connection {
  net::UniqueFd fd;
  ControlPeer peer;
  std::thread thread;
  std::atomic<bool> done{false};
  // The reply and the keepalives share the socket: one writer at a time.
  std::mutex send_mu;
  // Set while the handler works on a request: the keepalive thread then
  // sends a keepalive once per interval.
  std::atomic<bool> busy{false};
  // AUTH state (the connection's thread only).
  bool authenticated = false;
  std::string server_nonce;
  std::string client_nonce;
};

StatusOr<std::unique_ptr<ControlService>> ControlService::Listen(
    Options options, ControlHandler handler) {
  PS_RETURN_IF_ERROR(xfer::RequireSecretFor(options.host, options.secret,
                                            "the control listener"));
  if (options.timeout_ms <= 0 || options.max_connections == 0) {
    return InvalidArgument(
        "control service: timeout and connection limit must be positive");
  }
  std::unique_ptr<ControlService> s(new ControlService);
  s->options_ = std::move(options);
  s->handler_ = std::move(handler);
  const std::string& host = s->options_.host;
  auto fd = net::ListenTcp(host, s->options_.port);
  if (!fd.ok()) {
    return fd.status().WithContext("control listener on " + host + ":" +
                                   std::to_string(s->options_.port));
  }
  s->listen_fd_ = std::move(*fd);
  PS_ASSIGN_OR_RETURN(s->port_, net::LocalPort(s->listen_fd_.get()));
  PS_ASSIGN_OR_RETURN(const std::string advertised,
                      net::AdvertisedHost(host, s->options_.advertise_host));
  s->address_ = net::JoinHostPort(advertised, s->port_);
  return s;
}

ControlService::~ControlService() { Stop(); }

void ControlService::Start() {
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  keepalive_thread_ = std::thread([this] { KeepaliveLoop(); });
}

void ControlService::Stop() {
  const bool first = !stop_.exchange(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_cv_.notify_all();
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  if (keepalive_thread_.joinable()) keepalive_thread_.join();
  if (!first) return;
  std::list<std::unique_ptr<Connection>> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : connections_) shutdown(c->fd.get(), SHUT_RDWR);
    connections.swap(connections_);
  }
  for (auto& c : connections) c->thread.join();
  listen_fd_.Reset();
}

void ControlService::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->done.load(std::memory_order_acquire)) {
      (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void ControlService::AcceptLoop() {
  while (!stop_.load(std::memory_order_acquire)) {
    pollfd p{listen_fd_.get(), POLLIN, 0};
    int n = poll(&p, 1, 100);
    std::lock_guard<std::mutex> lock(mu_);
    ReapFinished();        // also while idle: finished threads do not linger
    if (n <= 0) continue;  // timeout or EINTR: look at the flag again
    auto fd = net::Accept(listen_fd_.get());
    if (!fd.ok()) {
      LOG(WARNING) << "control listener " << address_
                   << ": accept failed: " << fd.status();
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) break;
    auto c = std::make_unique<Connection>();
    c->fd = std::move(*fd);
    c->peer.address = net::PeerAddress(c->fd.get());
    if (connections_.size() >= options_.max_connections) {
      // Told why and closed now, not at some later accept.
      proto::ControlReply refusal;
      protocol::SetControlError(
          ResourceExhausted(
              "server " + address_ + " already has " +
              std::to_string(connections_.size()) +
              " control connections (the limit, from --num_workers)"),
          &refusal);
      (void)protocol::SendControlMessage(c->fd.get(), refusal, DeadlineIn(100));
      LOG_EVERY_N(WARNING, 20)
          << "control listener " << address_ << ": refused a connection from "
          << c->peer.address << ": " << connections_.size()
          << " connections open (the limit)";
      continue;
    }
    Connection* raw = c.get();
    connections_.push_back(std::move(c));
    try {
      raw->thread = std::thread([this, raw] { Serve(raw); });
    } catch (const std::system_error& e) {
      // Out of threads (a limit of the machine): this peer is refused, the
      // others are served on.
      LOG_EVERY_N(WARNING, 20)
          << "control listener " << address_ << ": no thread for "
          << raw->peer.address << ": " << e.what();
      connections_.pop_back();
    }
  }
}

void ControlService::KeepaliveLoop() {
  const auto interval =
      std::chrono::milliseconds(protocol::kKeepaliveIntervalMs);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_.load(std::memory_order_acquire)) {
    stop_cv_.wait_for(lock, interval);
    for (auto& c : connections_) {
      if (!c->busy.load(std::memory_order_acquire)) continue;
      std::unique_lock<std::mutex> send(c->send_mu, std::try_to_lock);
      // Not owned: the reply is going out right now. Not busy any more: the
      // reply went out (a keepalive after it would only cost the client a
      // skip, but there is no need).
      if (!send.owns_lock() || !c->busy.load(std::memory_order_acquire)) {
        continue;
      }
      // Never blocks: a client that does not read loses keepalives, not us.
      const uint32_t frame = protocol::kKeepaliveFrame;
      const StatusOr<size_t> n =
          net::SendSome(c->fd.get(), &frame, sizeof(frame));
      // Part of a frame would garble the stream: such a client (its
      // buffer full) is cut off.
      if (n.ok() && *n > 0 && *n < sizeof(frame)) {
        shutdown(c->fd.get(), SHUT_RDWR);
      }
    }
  }
}

bool ControlService::Authenticate(Connection* c, const proto::AuthRequest& auth,
                                  proto::ControlReply* reply) {
  const xfer::ClusterSecret& secret = options_.secret;
  if (!auth.nonce().empty()) {
    // First exchange: the client's nonce in, ours and our proof out.
    if (auth.nonce().size() != xfer::kNonceBytes) {
      protocol::SetControlError(
          InvalidArgument("auth nonce of " +
                          std::to_string(auth.nonce().size()) + " bytes"),
          reply);
      return false;
    }
    c->client_nonce = auth.nonce();
    proto::AuthReply* a = reply->mutable_auth();
    if (secret.empty()) return true;  // no proof: the client decides
    c->server_nonce = xfer::NewNonce();
    a->set_nonce(c->server_nonce);
    a->set_proof(secret.Prove(protocol::kControlAuthProtocol,
                              xfer::AuthRole::kAcceptor, c->server_nonce,
                              c->client_nonce));
    return true;
  }
  if (secret.empty()) {
    reply->mutable_auth()->set_authenticated(true);
    return true;
  }
  if (c->server_nonce.empty() ||
      !secret.Verify(protocol::kControlAuthProtocol, xfer::AuthRole::kConnector,
                     c->server_nonce, c->client_nonce, auth.proof())) {
    LOG(WARNING) << "control listener " << address_
                 << ": refused the connection from " << c->peer.address
                 << ": authentication failed (a different cluster secret)";
    protocol::SetControlError(
        Unauthenticated("authentication failed: a different cluster "
                        "secret"),
        reply);
    return false;
  }
  c->authenticated = true;
  reply->mutable_auth()->set_authenticated(true);
  return true;
}

void ControlService::Serve(Connection* c) {
  const int fd = c->fd.get();
  const int timeout = options_.timeout_ms;
  // Until the first request (with a secret: until the proof) a connection
  // has timeout_ms; afterwards an authenticated peer may stay idle.
  const Deadline setup_deadline = DeadlineIn(timeout);
  bool first = true;
  for (;;) {
    const bool settled =
        !first && (options_.secret.empty() || c->authenticated);
    proto::ControlRequest request;
    Status s = protocol::RecvControlMessage(
        fd, &request, settled ? Deadline::max() : setup_deadline, timeout);
    first = false;
    if (!s.ok()) {
      if (!s.Is(StatusCode::kPeerLost) && !stop_.load()) {
        LOG_EVERY_N(WARNING, 20) << "control connection from "
                                 << c->peer.address << " closed: " << s;
      }
      break;
    }
    proto::ControlReply reply;
    bool go_on = true;
    if (request.has_auth()) {
      go_on = Authenticate(c, request.auth(), &reply);
    } else if (!options_.secret.empty() && !c->authenticated) {
      LOG_EVERY_N(WARNING, 20)
          << "control listener " << address_ << ": refused a request from "
          << c->peer.address << " before authentication";
      protocol::SetControlError(Unauthenticated("server " + address_ +
                                                " requires the cluster secret "
                                                "(--cluster_secret_file or "
                                                "$PS_CLUSTER_SECRET_FILE)"),
                                &reply);
      go_on = false;
    } else {
      c->busy.store(true, std::memory_order_release);
      reply = handler_(request, &c->peer);
      c->busy.store(false, std::memory_order_release);
    }
    {
      std::lock_guard<std::mutex> send(c->send_mu);
      s = protocol::SendControlMessage(
          fd, reply,
          DeadlineIn(protocol::BodyDeadlineMs(reply.ByteSizeLong(), timeout)));
    }
    if (!s.ok()) {
      if (!stop_.load()) {
        LOG_EVERY_N(WARNING, 20) << "control connection from "
                                 << c->peer.address << ": cannot reply: " << s;
      }
      break;
    }
    if (!go_on) break;
  }
  if (c->peer.worker_id >= 0 && !stop_.load()) {
    LOG(INFO) << "worker-" << c->peer.worker_id << " (" << c->peer.address
              << ") disconnected";
  }
  // Closed now, not when the accept loop reaps the thread.
  shutdown(fd, SHUT_RDWR);
  if (options_.on_close) options_.on_close(c->peer);
  c->done.store(true, std::memory_order_release);
}

}  // namespace ps::server
