#include "server/control_service.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "protocol/control_channel.h"

namespace ps::server {
namespace {

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return "unknown peer";
  }
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace

StatusOr<std::unique_ptr<ControlService>> ControlService::Listen(
    const std::string& host, uint16_t port, ControlHandler handler) {
  std::unique_ptr<ControlService> s(new ControlService);
  s->handler_ = std::move(handler);
  auto fd = xfer::internal::ListenTcp(host, port);
  if (!fd.ok()) {
    return fd.status().WithContext("control listener on " + host + ":" +
                                   std::to_string(port));
  }
  s->listen_fd_ = std::move(*fd);
  PS_ASSIGN_OR_RETURN(s->port_, xfer::internal::LocalPort(s->listen_fd_.get()));
  s->address_ =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
      std::to_string(s->port_);
  return s;
}

ControlService::~ControlService() { Stop(); }

void ControlService::Start() {
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

void ControlService::Stop() {
  if (stop_.exchange(true)) {
    if (accept_thread_.joinable()) accept_thread_.join();
    return;
  }
  if (accept_thread_.joinable()) accept_thread_.join();
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
    if (n <= 0) continue;  // timeout or EINTR: look at the flag again
    auto fd = xfer::internal::Accept(listen_fd_.get());
    if (!fd.ok()) {
      LOG(WARNING) << "control listener " << address_
                   << ": accept failed: " << fd.status();
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ReapFinished();
    if (stop_.load(std::memory_order_acquire)) break;
    auto c = std::make_unique<Connection>();
    c->fd = std::move(*fd);
    c->peer.address = PeerAddress(c->fd.get());
    Connection* raw = c.get();
    connections_.push_back(std::move(c));
    raw->thread = std::thread([this, raw] { Serve(raw); });
  }
}

void ControlService::Serve(Connection* c) {
  const int fd = c->fd.get();
  for (;;) {
    proto::ControlRequest request;
    Status s = protocol::RecvControlMessage(fd, &request);
    if (!s.ok()) {
      if (!s.Is(StatusCode::kPeerLost) && !stop_.load()) {
        LOG(WARNING) << "control connection from " << c->peer.address
                     << " closed: " << s;
      }
      break;
    }
    proto::ControlReply reply = handler_(request, &c->peer);
    s = protocol::SendControlMessage(fd, reply);
    if (!s.ok()) {
      if (!stop_.load()) {
        LOG(WARNING) << "control connection from " << c->peer.address
                     << ": cannot reply: " << s;
      }
      break;
    }
  }
  if (c->peer.worker_id >= 0 && !stop_.load()) {
    LOG(INFO) << "worker-" << c->peer.worker_id << " (" << c->peer.address
              << ") disconnected";
  }
  c->done.store(true, std::memory_order_release);
}

}  // namespace ps::server
