// Setting up sockets: listening and connected TCP sockets, listening and
// connected Unix sockets in the abstract namespace (nothing on disk), and the
// addresses at either end. Every function returns a Status (never throws or
// aborts) and retries on EINTR. Moving bytes over the sockets is
// net/transfer.h's job.
//
// Thread safety: the functions share no state; call them from any thread.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <utility>

#include "base/status.h"
#include "base/status_or.h"
#include "net/unique_fd.h"

namespace ps::net {

// The backlog of every listener: as deep as the kernel allows
// (net.core.somaxconn caps it). A burst of connections (workers starting
// at once, or a crowd of outsiders the accept loop is draining) then waits
// in the queue instead of having its SYNs dropped and retried a second
// later.
inline constexpr int kListenBacklog = SOMAXCONN;

// "host:port" -> listening TCP socket (port 0: any free port).
StatusOr<UniqueFd> ListenTcp(const std::string& host, uint16_t port);
// The port a listening socket is bound to.
StatusOr<uint16_t> LocalPort(int fd);
// Listening Unix socket in the abstract namespace.
StatusOr<UniqueFd> ListenUnix(const std::string& abstract_name);
// Connected sockets (blocking, TCP_NODELAY on TCP). An unreachable TCP host
// costs at most `timeout_ms`: one the kernel finds no route to (a neighbour
// that did not answer, on a lossy link) is dialed again until then, and the
// last failure returned. A Unix listener whose backlog stays full gives
// kTimeout at `deadline`.
StatusOr<UniqueFd> ConnectTcp(const std::string& address, int timeout_ms);
StatusOr<UniqueFd> ConnectUnix(const std::string& abstract_name,
                               Deadline deadline);
// Sets or clears O_NONBLOCK (a listener that one thread polls beside other
// sockets; a connection handed from a poll loop to a thread of its own).
Status SetBlocking(int fd, bool blocking);
// accept4 with CLOEXEC; TCP_NODELAY on TCP.
StatusOr<UniqueFd> Accept(int listen_fd);

// Closes `fd` with a TCP reset rather than a FIN: nothing still queued on
// it is delivered after the close (an abandoned attempt's hello).
void CloseWithReset(UniqueFd& fd);

// What the kernel knows of a TCP connection's path: segments sent and not
// acknowledged, bytes queued and not sent yet (a link that is down keeps
// them), the time since the last acknowledgement arrived, and the smoothed
// round-trip time. Zeros for non-TCP sockets.
struct TcpPath {
  uint32_t unacked = 0;
  uint32_t unsent_bytes = 0;
  uint32_t ms_since_ack = 0;
  uint32_t rtt_us = 0;
};
TcpPath TcpPathOf(int fd);

// True when the TCP peer closed the connection in order (its FIN arrived),
// false after a reset or while it is open (and for non-TCP sockets). A
// receive reads end-of-stream in both cases once the error is consumed.
bool ClosedInOrder(int fd);

// "203.0.113.7:53422", "[::1]:4000", or "local peer pid 42" for a Unix
// socket: who is at the other end, for log lines.
std::string PeerAddress(int fd);

// "host:port" or "[v6]:port" -> (host, port); kInvalidArgument otherwise.
StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(
    const std::string& address);

}  // namespace ps::net
