// Thin, Status-returning wrappers over the socket calls the transports need.
// Every function retries on EINTR; none throws or aborts.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::xfer::internal {

// A point in time by which a socket operation must be done.
using Deadline = std::chrono::steady_clock::time_point;

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset();

 private:
  int fd_ = -1;
};

// "host:port" -> listening TCP socket (port 0: any free port).
StatusOr<UniqueFd> ListenTcp(const std::string& host, uint16_t port);
// The port a listening socket is bound to.
StatusOr<uint16_t> LocalPort(int fd);
// Listening Unix socket in the abstract namespace (nothing on disk).
StatusOr<UniqueFd> ListenUnix(const std::string& abstract_name);
// Connected sockets (blocking, TCP_NODELAY on TCP).
StatusOr<UniqueFd> ConnectTcp(const std::string& address, int timeout_ms);
StatusOr<UniqueFd> ConnectUnix(const std::string& abstract_name,
                               Deadline deadline);
// accept4 with CLOEXEC; TCP_NODELAY on TCP.
StatusOr<UniqueFd> Accept(int listen_fd);

// Send/receive exactly `len` bytes. A closed or reset peer gives kPeerLost.
Status SendAll(int fd, const void* data, size_t len);
Status RecvAll(int fd, void* data, size_t len);
// writev until all iovecs are sent (the array is modified).
Status SendAllV(int fd, struct iovec* iov, int iovcnt);
// Reads and throws away `len` bytes.
Status Skip(int fd, uint64_t len);

// The same moves with one deadline for all of it: kTimeout (naming `what`)
// once it passes before the last byte moved, however the bytes trickle in.
Status SendAllBefore(int fd, const void* data, size_t len, Deadline deadline,
                     std::string_view what);
Status RecvAllBefore(int fd, void* data, size_t len, Deadline deadline,
                     std::string_view what);
// Waits until `fd` is readable (or closed): true, or false at the deadline.
StatusOr<bool> WaitReadable(int fd, Deadline deadline);
// Deadline `ms` milliseconds from now.
Deadline DeadlineIn(int64_t ms);

// "203.0.113.7:53422", "[::1]:4000", or "local peer pid 42" for a Unix
// socket: who is at the other end, for log lines.
std::string PeerAddress(int fd);

// Sends `data` with one file descriptor attached (Unix sockets only).
Status SendWithFd(int fd, const void* data, size_t len, int fd_to_send);
// Receives exactly `len` bytes and the descriptor sent with them, if any
// (*received_fd = -1 when none came).
Status RecvWithFd(int fd, void* data, size_t len, int* received_fd);

// "host:port" or "[v6]:port" -> (host, port); kInvalidArgument otherwise.
StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(
    const std::string& address);

}  // namespace ps::xfer::internal
