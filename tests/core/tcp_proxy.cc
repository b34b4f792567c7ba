#include "tests/core/tcp_proxy.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "net/connect.h"
#include "net/transfer.h"

namespace ps::testing {

TcpProxy::TcpProxy(std::string target) : target_(std::move(target)) {
  auto fd = net::ListenTcp("127.0.0.1", 0);
  if (!fd.ok()) std::abort();  // a test machine without loopback
  listen_ = std::move(*fd);
  port_ = *net::LocalPort(listen_.get());
  wake_ = net::UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  thread_ = std::thread([this] { Loop(); });
}

TcpProxy::~TcpProxy() {
  stop_.store(true);
  uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

std::string TcpProxy::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

void TcpProxy::Reset() {
  reset_.store(true);
  uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
}

std::vector<TcpProxy::Captured> TcpProxy::captured() const {
  std::lock_guard<std::mutex> lock(captured_mu_);
  return captured_;
}

void TcpProxy::Capture(const Pair& pair, int side, const char* data, size_t n) {
  std::lock_guard<std::mutex> lock(captured_mu_);
  Captured& c = captured_[pair.index];
  std::string& into = side == 0 ? c.from_client : c.from_server;
  into.append(data, std::min(n, kCapturedBytes - into.size()));
}

void TcpProxy::Loop() {
  std::vector<Pair> pairs;
  char buffer[1 << 16];
  while (!stop_.load()) {
    std::vector<pollfd> fds{{listen_.get(), POLLIN, 0},
                            {wake_.get(), POLLIN, 0}};
    for (const Pair& p : pairs) {
      fds.push_back({p.client.get(), POLLIN, 0});
      fds.push_back({p.server.get(), POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) {
      uint64_t n;
      (void)!read(wake_.get(), &n, sizeof(n));
    }
    if (reset_.exchange(false)) {
      for (Pair& p : pairs) {
        net::CloseWithReset(p.client);
        net::CloseWithReset(p.server);
      }
      pairs.clear();
      continue;
    }
    for (size_t i = 0; i < pairs.size(); ++i) {
      for (int side = 0; side < 2; ++side) {
        const pollfd& f = fds[2 + 2 * i + side];
        if (f.revents == 0) continue;
        Pair& p = pairs[i];
        net::UniqueFd& from = side == 0 ? p.client : p.server;
        net::UniqueFd& to = side == 0 ? p.server : p.client;
        if (!from.valid() || !to.valid()) continue;
        const ssize_t n = recv(from.get(), buffer, sizeof(buffer), 0);
        if (n <= 0) {
          // An orderly close (or an error) on one side ends the pair the
          // same way on the other.
          if (n == 0) {
            shutdown(to.get(), SHUT_WR);
            from.Reset();
          } else {
            net::CloseWithReset(to);
            net::CloseWithReset(from);
          }
          continue;
        }
        Capture(p, side, buffer, static_cast<size_t>(n));
        if ((side == 1 && dropping_.load()) ||
            (side == 0 && dropping_requests_.load())) {
          dropped_.fetch_add(static_cast<uint64_t>(n));
          continue;
        }
        // Blocking send: the relay is a test's, its peers read.
        if (!net::SendAll(to.get(), buffer, static_cast<size_t>(n)).ok()) {
          net::CloseWithReset(to);
          net::CloseWithReset(from);
        }
      }
    }
    std::erase_if(pairs, [](const Pair& p) {
      return !p.client.valid() && !p.server.valid();
    });
    if (fds[0].revents != 0) {
      auto client = net::Accept(listen_.get());
      if (!client.ok()) continue;
      accepted_.fetch_add(1);
      if (refusing_.load()) {
        net::CloseWithReset(*client);
        continue;
      }
      auto server = net::ConnectTcp(target_, 5000);
      if (!server.ok()) {
        net::CloseWithReset(*client);
        continue;
      }
      size_t index;
      {
        std::lock_guard<std::mutex> lock(captured_mu_);
        index = captured_.size();
        captured_.emplace_back();
      }
      pairs.push_back({std::move(*client), std::move(*server), index});
    }
  }
  for (Pair& p : pairs) {
    net::CloseWithReset(p.client);
    net::CloseWithReset(p.server);
  }
}

}  // namespace ps::testing
