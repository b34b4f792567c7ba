#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace ps::xfer::internal {
namespace {

Status NetErr(const std::string& what, int err) {
  if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) {
    return ErrnoStatus(StatusCode::kPeerLost, what, err);
  }
  return ErrnoStatus(StatusCode::kNetwork, what, err);
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

void UniqueFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

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
  if (listen(fd.get(), 128) != 0) return NetErr("listen", errno);
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
  if (listen(fd.get(), 128) != 0) return NetErr("listen", errno);
  return fd;
}

StatusOr<UniqueFd> ConnectTcp(const std::string& address, int timeout_ms) {
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
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = NetErr("connect " + address, errno);
      continue;
    }
    fcntl(fd.get(), F_SETFL, flags);
    SetNoDelay(fd.get());
    return fd;
  }
  return last;
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

Status SendAll(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return NetErr("send", errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::OK();
}

Status RecvAll(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_WAITALL);
    if (n == 0) return PeerLost("connection closed by peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      return NetErr("recv", errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::OK();
}

Status SendAllV(int fd, struct iovec* iov, int iovcnt) {
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(std::min(iovcnt, IOV_MAX));
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return NetErr("sendmsg", errno);
    }
    auto sent = static_cast<size_t>(n);
    while (iovcnt > 0 && sent >= iov->iov_len) {
      sent -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + sent;
      iov->iov_len -= sent;
    }
  }
  return Status::OK();
}

Status Skip(int fd, uint64_t len) {
  char scratch[64 * 1024];
  while (len > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(len, sizeof(scratch)));
    PS_RETURN_IF_ERROR(RecvAll(fd, scratch, n));
    len -= n;
  }
  return Status::OK();
}

Deadline DeadlineIn(int64_t ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}

namespace {

// Milliseconds left until `deadline` for poll(2): 0 when it passed, and
// rounded up so that poll never returns a hair early and spins.
int PollMsUntil(Deadline deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// Waits for `events` on fd until the deadline: true when ready (or the
// socket has an error or hang-up to report), false at the deadline.
StatusOr<bool> WaitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, PollMsUntil(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) return NetErr("poll", errno);
  }
}

}  // namespace

StatusOr<bool> WaitReadable(int fd, Deadline deadline) {
  return WaitFor(fd, POLLIN, deadline);
}

Status SendAllBefore(int fd, const void* data, size_t len, Deadline deadline,
                     std::string_view what) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    // Try first: poll(2) only when the socket would block.
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return NetErr(std::string(what) + ": send", errno);
    }
    PS_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLOUT, deadline));
    if (!ready) {
      return Timeout(std::string(what) + ": the peer did not take " +
                     std::to_string(len) + " more bytes in time");
    }
  }
  return Status::OK();
}

Status RecvAllBefore(int fd, void* data, size_t len, Deadline deadline,
                     std::string_view what) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return PeerLost(std::string(what) + ": connection closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return NetErr(std::string(what) + ": recv", errno);
    }
    PS_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLIN, deadline));
    if (!ready) {
      return Timeout(std::string(what) + ": " + std::to_string(len) +
                     " bytes still missing at the deadline");
    }
  }
  return Status::OK();
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

Status SendWithFd(int fd, const void* data, size_t len, int fd_to_send) {
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd_to_send, sizeof(int));
  for (;;) {
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return NetErr("sendmsg(SCM_RIGHTS)", errno);
    // The descriptor went with the first byte; send any rest plainly.
    return SendAll(fd, static_cast<const char*>(data) + n,
                   len - static_cast<size_t>(n));
  }
}

Status RecvWithFd(int fd, void* data, size_t len, int* received_fd) {
  *received_fd = -1;
  iovec iov{data, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return PeerLost("connection closed by peer");
  if (n < 0) return NetErr("recvmsg", errno);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      std::memcpy(received_fd, CMSG_DATA(c), sizeof(int));
    }
  }
  return RecvAll(fd, static_cast<char*>(data) + n,
                 len - static_cast<size_t>(n));
}

}  // namespace ps::xfer::internal
