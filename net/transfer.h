// Moving bytes over a connected stream socket. One loop, Transfer(), moves
// every byte of an iovec array in one direction, whatever the socket does on
// the way: EINTR is retried, partial sends and receives go on from where they
// stopped, EAGAIN is waited out (poll(2) until a deadline, or a watch's
// verdict on a socket with SO_RCVTIMEO/SO_SNDTIMEO), descriptors may ride
// along as SCM_RIGHTS. Every helper below is that loop with its options set.
//
// Outcomes: OK once the last byte moved; kPeerLost when the peer closed or
// reset the connection (a receive that reads end-of-stream); kTimeout when
// the deadline passed first (the message says how many bytes were left);
// kNetwork for any other socket error; or whatever a TransferWatch returned.
// Sends never raise SIGPIPE (MSG_NOSIGNAL).
//
// Thread safety: the functions share no state. Two threads may move bytes
// over one socket at the same time only in opposite directions; callers
// serialize same-direction transfers (a torn message could not be parsed).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "base/status_or.h"
#include "net/unique_fd.h"

namespace ps::net {

enum class Direction : uint8_t { kSend, kRecv };

// Watches a transfer on a blocking socket with a send/receive timeout (the
// "tick"): told of each step forward, and asked at each tick without one
// whether to wait on. For a transport that declares a stalled peer lost.
class TransferWatch {
 public:
  virtual ~TransferWatch() = default;
  // Some bytes moved.
  virtual void OnProgress() = 0;
  // The socket timed out with bytes left: OK waits on; an error ends the
  // transfer with it.
  virtual Status OnIdle() = 0;
};

struct TransferOptions {
  Direction direction = Direction::kRecv;
  // MSG_* flags for every call (MSG_WAITALL on a blocking receive keeps it to
  // one call per message); MSG_NOSIGNAL is always added to sends.
  int flags = 0;
  // Deadline::max(): calls block. Otherwise each call is MSG_DONTWAIT and a
  // socket that would block is polled until the deadline, then kTimeout.
  Deadline deadline = Deadline::max();
  // Return OK as soon as the socket would block, with what moved so far
  // (nothing is waited for): the non-blocking "what is there" read.
  bool until_would_block = false;
  TransferWatch* watch = nullptr;
  // Names the transfer in error messages ("hello: connection closed ...");
  // empty: the messages name the call alone.
  std::string_view what = {};
  // Send: a descriptor to pass along with the first bytes (-1: none).
  int fd_to_send = -1;
  // Receive: where descriptors that come along go (nullptr: none are
  // accepted). The last one is kept, any other closed.
  UniqueFd* received_fd = nullptr;
};

// Moves every byte of iov[0..count) (the array is modified as bytes move).
// `*moved` (optional) gets the bytes moved, on success or not.
Status Transfer(int fd, iovec* iov, size_t count,
                const TransferOptions& options, size_t* moved = nullptr);

// Send/receive exactly `len` bytes, blocking. A closed or reset peer gives
// kPeerLost.
Status SendAll(int fd, const void* data, size_t len);
Status RecvAll(int fd, void* data, size_t len);
// The same for an iovec array (modified as bytes move).
Status SendAllV(int fd, iovec* iov, size_t count);
Status RecvAllV(int fd, iovec* iov, size_t count);
// Reads and throws away `len` bytes.
Status Skip(int fd, uint64_t len);

// The same moves with one deadline for all of it: kTimeout (naming `what`)
// once it passes before the last byte moved, however the bytes trickle in.
Status SendAllBefore(int fd, const void* data, size_t len, Deadline deadline,
                     std::string_view what);
Status RecvAllBefore(int fd, void* data, size_t len, Deadline deadline,
                     std::string_view what);

// Without waiting: as many of `len` bytes as the socket takes or has now
// (0 when it would block); an error when the peer closed or the socket broke.
StatusOr<size_t> SendSome(int fd, const void* data, size_t len);
StatusOr<size_t> RecvSome(int fd, void* data, size_t len,
                          std::string_view what);

// Waits until `fd` is readable (or closed): true, or false at the deadline.
StatusOr<bool> WaitReadable(int fd, Deadline deadline);

// Sends `data` with one file descriptor attached (Unix sockets only).
Status SendWithFd(int fd, const void* data, size_t len, int fd_to_send);
// Receives exactly `len` bytes and the descriptor sent with them, if any
// (*received stays invalid when none came).
Status RecvWithFd(int fd, void* data, size_t len, UniqueFd* received);

}  // namespace ps::net
