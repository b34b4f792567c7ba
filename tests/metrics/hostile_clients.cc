#include "tests/metrics/hostile_clients.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "net/connect.h"

namespace ps::testing {
namespace {

using Clock = std::chrono::steady_clock;

// What every slowloris connection sends, a byte at a time: a request head
// that never ends (its last field's value grows for ever).
constexpr char kPartialHead[] =
    "GET /metrics HTTP/1.1\r\nHost: metrics\r\nX-Slow: ";

StatusOr<std::vector<uint8_t>> SockAddr(const std::string& address) {
  PS_ASSIGN_OR_RETURN(auto host_port, net::SplitHostPort(address));
  sockaddr_storage ss{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  size_t len = 0;
  if (inet_pton(AF_INET, host_port.first.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(host_port.second);
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host_port.first.c_str(), &v6->sin6_addr) ==
             1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(host_port.second);
    len = sizeof(sockaddr_in6);
  } else {
    return InvalidArgument("not an IP address: " + host_port.first);
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(&ss);
  return std::vector<uint8_t>(bytes, bytes + len);
}

// A non-blocking connect that may still be in progress; invalid if even
// the socket could not be made.
net::UniqueFd ConnectNonBlocking(const std::vector<uint8_t>& address) {
  const auto* sa = reinterpret_cast<const sockaddr*>(address.data());
  net::UniqueFd fd(
      socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  if (connect(fd.get(), sa, static_cast<socklen_t>(address.size())) != 0 &&
      errno != EINPROGRESS) {
    // Refused at once: the caller counts it as closed and tries again.
    fd.Reset();
  }
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<Slowloris>> Slowloris::Start(
    const std::string& address, size_t connections,
    std::chrono::milliseconds drip_every) {
  std::unique_ptr<Slowloris> s(new Slowloris());
  PS_ASSIGN_OR_RETURN(s->address_, SockAddr(address));
  s->connections_ = connections;
  s->drip_every_ = drip_every;
  Slowloris* raw = s.get();
  s->thread_ = std::thread([raw] { raw->Run(); });
  return s;
}

void Slowloris::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void Slowloris::Run() {
  struct Conn {
    net::UniqueFd fd;
    size_t sent = 0;
    Clock::time_point next_drip;
  };
  const size_t prefix = sizeof(kPartialHead) - 1;
  std::vector<Conn> conns(connections_);
  auto open = [&](Conn& c, Clock::time_point first_drip) {
    c.fd = ConnectNonBlocking(address_);
    c.sent = 0;
    c.next_drip = first_drip;
    opened_.fetch_add(1);
  };
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < conns.size(); ++i) {
    // The first bytes spread over one period, as real drips would be.
    open(conns[i], start + drip_every_ * i / conns.size());
  }
  std::vector<pollfd> fds(conns.size());
  while (!stop_.load()) {
    for (size_t i = 0; i < conns.size(); ++i) {
      fds[i] = {conns[i].fd.get(), POLLIN, 0};
    }
    poll(fds.data(), fds.size(), 0);
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      // Readable or hung up: the server closed it (it never answers a
      // head that does not end). Open another at once.
      bool closed =
          !c.fd.valid() || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
      if (!closed && now >= c.next_drip) {
        const char byte = c.sent < prefix ? kPartialHead[c.sent] : 'a';
        const ssize_t n =
            send(c.fd.get(), &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == 1) {
          ++c.sent;
          dripped_.fetch_add(1);
          c.next_drip = now + drip_every_;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != ENOTCONN && errno != EINPROGRESS &&
                   errno != EALREADY) {
          closed = true;  // reset or refused; the others: still connecting
        }
      }
      if (closed) {
        closed_.fetch_add(1);
        open(c, now);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

StatusOr<std::vector<net::UniqueFd>> OpenIdleConnections(
    const std::string& address, size_t count) {
  PS_ASSIGN_OR_RETURN(auto sa, SockAddr(address));
  std::vector<net::UniqueFd> fds;
  for (size_t i = 0; i < count; ++i) {
    net::UniqueFd fd = ConnectNonBlocking(sa);
    if (!fd.valid()) {
      return ErrnoStatus(StatusCode::kNetwork, "connect " + address, errno);
    }
    fds.push_back(std::move(fd));
  }
  return fds;
}

int OpenDescriptors(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

}  // namespace ps::testing
