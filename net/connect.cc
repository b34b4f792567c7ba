#include "net/connect.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>

#include "net/redial_backoff.h"
#include "net/socket_error.h"

namespace ps::net {
namespace {

Status NetErr(const std::string& what, int err) {
  return SocketError(what, err);
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Fills an abstract-namespace sockaddr_un; returns its length.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);  // sun_path[0] = 0
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};

StatusOr<std::unique_ptr<addrinfo, AddrInfoDeleter>> Resolve(
    const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                       &hints, &result);
  if (rc != 0) {
    return InvalidArgument("cannot resolve '" + host +
                           "': " + gai_strerror(rc));
  }
  return std::unique_ptr<addrinfo, AddrInfoDeleter>(result);
}

}  // namespace

StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(
    const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return InvalidArgument("address '" + address + "' is not host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  char* end = nullptr;
  unsigned long port = std::strtoul(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port > 65535) {
    return InvalidArgument("address '" + address + "' has a bad port");
  }
  return std::make_pair(host, static_cast<uint16_t>(port));
}

StatusOr<UniqueFd> ListenTcp(const std::string& host, uint16_t port) {
  PS_ASSIGN_OR_RETURN(auto ai, Resolve(host, port, /*passive=*/true));
  UniqueFd fd(socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return NetErr("socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    return NetErr("bind " + host + ":" + std::to_string(port), errno);
  }
  if (listen(fd.get(), kListenBacklog) != 0) return NetErr("listen", errno);
  return fd;
}

StatusOr<uint16_t> LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return NetErr("getsockname", errno);
  }
  if (ss.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

StatusOr<UniqueFd> ListenUnix(const std::string& abstract_name) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return NetErr("socket(AF_UNIX)", errno);
  sockaddr_un addr;
  socklen_t len = AbstractAddress(abstract_name, &addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return NetErr("bind unix @" + abstract_name, errno);
  }
  if (listen(fd.get(), kListenBacklog) != 0) return NetErr("listen", errno);
  return fd;
}

void CloseWithReset(UniqueFd& fd) {
  if (!fd.valid()) return;
  linger abort{1, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  fd.Reset();
}

TcpPath TcpPathOf(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return {};
  int unsent = 0;
  if (ioctl(fd, SIOCOUTQNSD, &unsent) != 0) unsent = 0;
  return {.unacked = info.tcpi_unacked,
          .unsent_bytes = static_cast<uint32_t>(unsent),
          .ms_since_ack = info.tcpi_last_ack_recv,
          .rtt_us = info.tcpi_rtt};
}

bool ClosedInOrder(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  return info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_LAST_ACK;
}

namespace {

// One dial of every address `address` resolves to, within `timeout_ms`.
// `unreachable`: the last failure was the kernel's "no route" to the host
// (EHOSTUNREACH, ENETUNREACH).
StatusOr<UniqueFd> DialTcp(const std::string& address, int timeout_ms,
                           bool* unreachable) {
  *unreachable = false;
  PS_ASSIGN_OR_RETURN(auto host_port, SplitHostPort(address));
  PS_ASSIGN_OR_RETURN(auto ai,
                      Resolve(host_port.first, host_port.second, false));
  Status last = NetErr("connect " + address, ECONNREFUSED);
  for (addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
    UniqueFd fd(socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return NetErr("socket", errno);
    // Non-blocking connect so an unreachable host costs at most timeout_ms.
    int flags = fcntl(fd.get(), F_GETFL);
    fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK);
    int rc = connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      rc = poll(&p, 1, timeout_ms);
      if (rc == 0) {
        last = Timeout("connect " + address + ": no answer in " +
                       std::to_string(timeout_ms) + " ms");
        *unreachable = false;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      *unreachable = errno == EHOSTUNREACH || errno == ENETUNREACH;
      last = NetErr("connect " + address, errno);
      continue;
    }
    fcntl(fd.get(), F_SETFL, flags);
    SetNoDelay(fd.get());
    return fd;
  }
  return last;
}

}  // namespace

StatusOr<UniqueFd> ConnectTcp(const std::string& address, int timeout_ms) {
  // "No route to host" is often a passing state: on a lossy link the
  // kernel gives up on finding the neighbour (three ARP or neighbour
  // solicitations a second apart, all lost) and fails the connect, and a
  // route may not be up yet. A new dial asks again, so the host is dialed
  // until it answers or the time is up (multihost_test's 5% loss once
  // failed a worker this way, 3.3 s into its 15 s).
  const Deadline deadline = DeadlineIn(timeout_ms);
  RedialBackoff backoff;
  for (;;) {
    bool unreachable = false;
    StatusOr<UniqueFd> fd = DialTcp(address, MsUntil(deadline), &unreachable);
    if (fd.ok() || !unreachable || !backoff.Fits(deadline)) return fd;
    backoff.Pause();
  }
}

StatusOr<UniqueFd> ConnectUnix(const std::string& abstract_name,
                               Deadline deadline) {
  sockaddr_un addr;
  socklen_t len = AbstractAddress(abstract_name, &addr);
  for (;;) {
    // Non-blocking: a listener whose backlog is full makes a blocking
    // connect wait without end; this one retries until the deadline.
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return NetErr("socket(AF_UNIX)", errno);
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    if (errno != EAGAIN && errno != EINTR) {
      return NetErr("connect unix @" + abstract_name, errno);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Timeout("connect unix @" + abstract_name +
                     ": the listener's backlog stayed full");
    }
    usleep(1000);
  }
}

Status SetBlocking(int fd, bool blocking) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 ||
      fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK) !=
          0) {
    return NetErr("fcntl O_NONBLOCK", errno);
  }
  return Status::OK();
}

StatusOr<UniqueFd> Accept(int listen_fd) {
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      SetNoDelay(fd);  // fails harmlessly on Unix sockets
      return UniqueFd(fd);
    }
    if (errno != EINTR) return NetErr("accept", errno);
  }
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return "unknown peer";
  }
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  if (ss.ss_family == AF_UNIX) {
    ucred cred{};
    socklen_t clen = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
      return "local peer pid " + std::to_string(cred.pid);
    }
    return "local peer";
  }
  return "unknown peer";
}

}  // namespace ps::net
