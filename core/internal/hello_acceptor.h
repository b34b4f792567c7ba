// internal::HelloAcceptor: the listening side of xfer connections, up to the
// end of the hello.
//
// A net::HandshakeGate (net/handshake_gate.h) accepts on every listener and
// runs each new connection's hello (with a cluster secret, also its
// challenge-response, core/auth.h) on one thread without ever waiting on
// one peer: each hello has one deadline for all of it (seconds, not the peer
// timeout), and when Options::max_pending hellos are in progress a new
// connection makes room by dropping the one that got least far. So a peer
// that connects and stays silent, or drips a valid hello one byte a second,
// costs one slot for a few seconds at most, and cannot keep a peer that
// knows the secret out (net/handshake_gate.h says how far that holds).
//
// A hello that completes (and whose sender proved the secret) goes to the
// OnHello callback, which builds the reply and takes the connection; a peer
// that fails any step is closed, and the refusals that matter (a wrong or
// missing proof, a malformed hello, a deadline passed) are logged with its
// address, at most one line per period however many come.
//
// Thread-safety: OnHello runs on the acceptor's thread, one hello at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "core/auth.h"
#include "core/descriptor.pb.h"
#include "net/handshake_gate.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class HelloAcceptor {
 public:
  struct Listener {
    net::UniqueFd fd;
    bool same_host = false;  // a Unix socket: peers on this host only
  };
  struct Options {
    std::string name;  // this context's name, for log lines and replies
    ClusterSecret secret;
    int hello_timeout_ms = net::kDefaultHandshakeTimeoutMs;  // a whole hello
    size_t max_pending = net::kDefaultMaxHandshakes;
  };
  // OnHello's decision: the reply to send and, when reply.error() is empty,
  // what takes the connection once the reply went out (`adopt` gets the
  // socket back in blocking mode).
  struct Answer {
    proto::HelloReply reply;
    std::function<void(net::UniqueFd)> adopt;
  };
  using OnHello =
      std::function<Answer(const proto::Hello& hello, bool same_host)>;

  static StatusOr<std::unique_ptr<HelloAcceptor>> Start(
      Options options, std::vector<Listener> listeners, OnHello on_hello);
  // Stops the thread; pending hellos are closed.
  ~HelloAcceptor() = default;
  HelloAcceptor(const HelloAcceptor&) = delete;
  HelloAcceptor& operator=(const HelloAcceptor&) = delete;

 private:
  HelloAcceptor() = default;

  Options options_;
  OnHello on_hello_;
  std::vector<bool> same_host_;  // by listener
  // Last: destroyed first, so its thread stops before what it reads goes.
  std::unique_ptr<net::HandshakeGate> gate_;
};

}  // namespace ps::xfer::internal
