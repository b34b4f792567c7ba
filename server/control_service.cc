#include "server/control_service.h"

#include <glog/logging.h>
#include <sys/socket.h>

#include <system_error>
#include <utility>
#include <vector>

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
};

StatusOr<std::unique_ptr<ControlService>> ControlService::Listen(
    Options options, ControlHandler handler) {
  PS_RETURN_IF_ERROR(xfer::RequireSecretFor(options.host, options.secret,
                                            "the control listener"));
  if (options.timeout_ms <= 0 || options.max_connections == 0 ||
      options.handshake_timeout_ms <= 0 || options.max_handshakes == 0) {
    return InvalidArgument(
        "control service: timeouts and connection limits must be positive");
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

Status ControlService::Start() {
  handshake_.address = address_;
  handshake_.secret = options_.secret;
  handshake_.admit = [this] { return Admit(); };
  handshake_.adopt = [this](net::UniqueFd fd,
                            std::optional<proto::ControlRequest> first) {
    Adopt(std::move(fd), std::move(first));
  };
  net::HandshakeGate::Options gate;
  gate.name = "control listener " + address_;
  gate.handshake_timeout_ms = options_.handshake_timeout_ms;
  gate.max_handshakes = options_.max_handshakes;
  std::vector<net::UniqueFd> listeners;
  listeners.push_back(std::move(listen_fd_));
  PS_ASSIGN_OR_RETURN(
      gate_, net::HandshakeGate::Start(
                 std::move(gate), std::move(listeners),
                 [this](size_t, int, const std::string&) {
                   return std::make_unique<ControlHandshake>(handshake_);
                 }));
  keepalive_thread_ = std::thread([this] { KeepaliveLoop(); });
  return Status::OK();
}

void ControlService::Stop() {
  const bool first = !stop_.exchange(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_cv_.notify_all();
  }
  if (!first) return;
  gate_.reset();  // no new connections; those in their handshake close
  if (keepalive_thread_.joinable()) keepalive_thread_.join();
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

Status ControlService::Admit() {
  std::lock_guard<std::mutex> lock(mu_);
  ReapFinished();
  if (connections_.size() < options_.max_connections) return Status::OK();
  return ResourceExhausted("server " + address_ + " already has " +
                           std::to_string(connections_.size()) +
                           " control connections (the limit, from "
                           "--num_workers)");
}

void ControlService::Adopt(net::UniqueFd fd,
                           std::optional<proto::ControlRequest> first) {
  auto c = std::make_unique<Connection>();
  c->fd = std::move(fd);
  c->peer.address = net::PeerAddress(c->fd.get());
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_.load(std::memory_order_acquire)) return;
  Connection* raw = c.get();
  connections_.push_back(std::move(c));
  try {
    raw->thread = std::thread([this, raw, first = std::move(first)]() mutable {
      Serve(raw, std::move(first));
    });
  } catch (const std::system_error& e) {
    // Out of threads (a limit of the machine): this peer is refused, the
    // others are served on.
    uint64_t held_back = 0;
    if (no_thread_log_.Allow(&held_back)) {
      LOG(WARNING) << "control listener " << address_ << ": no thread for "
                   << raw->peer.address << ": " << e.what()
                   << LogLimiter::HeldBack(held_back);
    }
    connections_.pop_back();
  }
}

void ControlService::KeepaliveLoop() {
  const auto interval =
      std::chrono::milliseconds(protocol::kKeepaliveIntervalMs);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_.load(std::memory_order_acquire)) {
    stop_cv_.wait_for(lock, interval);
    ReapFinished();  // finished threads do not linger while no one connects
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

void ControlService::Serve(Connection* c,
                           std::optional<proto::ControlRequest> first) {
  const int fd = c->fd.get();
  const int timeout = options_.timeout_ms;
  for (;;) {
    // Established: the peer may stay idle between requests as long as it
    // likes (a worker between checkpoints).
    proto::ControlRequest request;
    if (first.has_value()) {
      request = std::move(*first);
      first.reset();
    } else if (Status s = protocol::RecvControlMessage(
                   fd, &request, Deadline::max(), timeout);
               !s.ok()) {
      if (!s.Is(StatusCode::kPeerLost) && !stop_.load()) {
        uint64_t held_back = 0;
        if (closed_log_.Allow(&held_back)) {
          LOG(WARNING) << "control connection from " << c->peer.address
                       << " closed: " << s << LogLimiter::HeldBack(held_back);
        }
      }
      break;
    }
    proto::ControlReply reply;
    if (request.has_auth()) {
      protocol::SetControlError(
          InvalidArgument("this connection has completed its handshake "
                          "already"),
          &reply);
    } else {
      c->busy.store(true, std::memory_order_release);
      reply = handler_(request, &c->peer);
      c->busy.store(false, std::memory_order_release);
    }
    Status s;
    {
      std::lock_guard<std::mutex> send(c->send_mu);
      s = protocol::SendControlMessage(
          fd, reply,
          DeadlineIn(protocol::BodyDeadlineMs(reply.ByteSizeLong(), timeout)));
    }
    if (!s.ok()) {
      if (!stop_.load()) {
        uint64_t held_back = 0;
        if (closed_log_.Allow(&held_back)) {
          LOG(WARNING) << "control connection from " << c->peer.address
                       << ": cannot reply: " << s
                       << LogLimiter::HeldBack(held_back);
        }
      }
      break;
    }
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
