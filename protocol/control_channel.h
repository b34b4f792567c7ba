// ControlChannel: the TCP connection between a worker (or another server)
// and a server that carries ControlRequest / ControlReply messages (auth,
// hello and cluster info, exact-key pushes and pulls, checkpoints, stats,
// shutdown). One request, one reply, in order.
//
// Framing: a 4-byte little-endian length, then the message. The length
// kKeepaliveFrame, with no body, is a keepalive: a server sends one every
// kKeepaliveIntervalMs while it works on a request that takes long (a cut
// waiting for the previous checkpoint, a restore), so that a client can
// hold every call to a short deadline, its timeout, and still wait as long
// as the server is alive and working.
//
// Reading is safe against any sender: a length prefix allocates nothing by
// itself (the buffer grows with the bytes that arrived), and a message whose
// first byte came must be whole within BodyDeadlineMs of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "core/auth.h"
#include "net/unique_fd.h"
#include "protocol/ps.pb.h"

namespace ps::protocol {

// Messages over this size are refused.
inline constexpr uint32_t kMaxControlMessageBytes = 256u << 20;
// Until a connection has completed its handshake (AUTH; without a secret,
// its first message), a message over this size closes it: a peer that has
// proved nothing costs the server a few KiB at most.
inline constexpr uint32_t kMaxHandshakeMessageBytes = 4096;
inline constexpr uint32_t kKeepaliveFrame = 0xffffffffu;
inline constexpr int kKeepaliveIntervalMs = 250;
// The protocol name the control channel's proofs cover (core/auth.h).
inline constexpr char kControlAuthProtocol[] = "ps control v1";

// How long a message of `bytes` may take once its first byte arrived:
// `timeout_ms`, plus a second per MiB (a slow link must not cut off a large
// exact-key pull).
int64_t BodyDeadlineMs(uint64_t bytes, int timeout_ms);

Status SendControlMessage(int fd, const google::protobuf::MessageLite& m,
                          net::Deadline deadline);
// Makes `reply` an error reply carrying `s` (its message and code), which
// ControlClient::Call turns back into `s`.
void SetControlError(const Status& s, proto::ControlReply* reply);
// Waits until `idle_deadline` for a message to start (keepalives restart
// the wait: each gives `keepalive_extension_ms` more; 0 ignores them as
// never sent), then reads it whole within BodyDeadlineMs(timeout_ms).
Status RecvControlMessage(int fd, google::protobuf::MessageLite* m,
                          net::Deadline idle_deadline, int timeout_ms,
                          int keepalive_extension_ms = 0);

// True for a request the server may get twice without harm (a query, a
// report of where a worker stands): a call whose reply was lost with its
// connection is sent again only when this holds.
bool SafeToRepeat(const proto::ControlRequest& request);

// The client's side: connect and complete the handshake (AUTH: with a
// secret, both sides prove it; without one, an exchange of the client's
// nonce that tells a client that the server requires a secret), then Call()
// for each request. Not thread-safe: one call at a time (callers
// serialize).
//
// After EnableReconnect, a connection broken by a reset while the server
// lives is made again (within timeout_ms of the failure, the rejoin request
// sent first on the new one) and the call goes on: a request that never left is
// sent on the new connection, one whose reply was lost only when SafeToRepeat
// (an exact-key push, a cut or a shutdown is not repeated: its error stands). A
// server that closed the connection in order (it exited) is not redialed.
class ControlClient {
 public:
  struct Options {
    // A call fails with kTimeout when the server sends nothing, not even a
    // keepalive, for this long; also the deadline of connecting.
    int timeout_ms = 30000;
    // Empty: the server must not require one.
    xfer::ClusterSecret secret;
  };
  static StatusOr<ControlClient> Connect(const std::string& address,
                                         const Options& options);
  // Sends `request` and waits for the reply; a reply with an error becomes
  // a Status with the server's code and message.
  StatusOr<proto::ControlReply> Call(const proto::ControlRequest& request);
  // Reconnects broken connections from now on (see above); `rejoin` (e.g.
  // the worker's hello, which tells the server whose requests follow) goes
  // first on each new connection, and its reply must be OK.
  void EnableReconnect(proto::ControlRequest rejoin) {
    rejoin_ = std::move(rejoin);
  }
  const std::string& address() const { return address_; }

 private:
  Status Authenticate();
  // One attempt on the current connection; *unsent: the request did not
  // leave (the server cannot have run it); *closed: the server closed the
  // connection in order.
  StatusOr<proto::ControlReply> CallOnce(const proto::ControlRequest& request,
                                         bool* unsent, bool* closed);
  // A new connection (and the rejoin request) before `deadline`.
  Status Redial(net::Deadline deadline);
  net::UniqueFd fd_;
  std::string address_;
  Options options_;
  std::optional<proto::ControlRequest> rejoin_;  // set: reconnect
};

}  // namespace ps::protocol
