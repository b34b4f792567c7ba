// internal::HelloAcceptor: the listening side of xfer connections, up to the
// end of the hello.
//
// One thread accepts on every listener and runs each new connection's hello
// (with a cluster secret, also its challenge-response, core/auth.h) without
// ever waiting on one peer: the sockets are non-blocking, each pending hello
// has one deadline for all of it, however its bytes trickle in, and at most
// Options::max_pending hellos are pending at once (more are closed at
// accept). So a peer that connects and stays silent, or drips a valid hello
// one byte a second, costs one pending slot until its deadline and delays
// nobody else.
//
// A hello that completes (and whose sender proved the secret) goes to the
// OnHello callback, which builds the reply and takes the connection; a peer
// that fails any step is closed, and the refusals that matter (a wrong or
// missing proof, a malformed hello, a deadline passed) are logged with its
// address.
//
// Thread-safety: OnHello runs on the acceptor's thread, one hello at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status_or.h"
#include "core/auth.h"
#include "core/descriptor.pb.h"
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
    int hello_timeout_ms = 10000;  // deadline of one whole hello
    size_t max_pending = 128;
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
  ~HelloAcceptor();
  HelloAcceptor(const HelloAcceptor&) = delete;
  HelloAcceptor& operator=(const HelloAcceptor&) = delete;

 private:
  struct Pending;
  HelloAcceptor(Options options, std::vector<Listener> listeners,
                OnHello on_hello);
  void Loop();
  void AcceptAll(const Listener& listener);
  // Moves one pending hello on with what arrived; false when it is over
  // (handed to OnHello, or refused and closed).
  bool Advance(Pending& p);
  bool Refuse(Pending& p, const Status& why, bool tell_peer);
  void Finish(Pending& p);

  const Options options_;
  std::vector<Listener> listeners_;
  const OnHello on_hello_;
  net::UniqueFd wake_;  // eventfd: the destructor stops the loop with it
  std::vector<std::unique_ptr<Pending>> pending_;  // the thread's own
  std::thread thread_;
};

}  // namespace ps::xfer::internal
