// HandshakeGate: the front door of a listening service. One thread accepts
// on the service's listeners and carries every new connection through its
// handshake (a hello, a proof of the cluster secret) without waiting on any
// peer; only a connection that completed its handshake is handed to the
// service. So whatever outsiders do before they have proved anything costs
// a bounded amount of the service, and never the slots, threads or memory
// of the peers it already serves:
//
// - one deadline for the whole handshake, however its bytes trickle in
//   (Options::handshake_timeout_ms: seconds, not a peer timeout);
// - at most Options::max_handshakes at once. One more makes room by
//   dropping the handshake that has got least far, the oldest of those
//   (a new connection is read as soon as it is accepted, so a peer whose
//   first message came with it counts as ahead at once): connections that
//   stay silent, or stall half-way, never keep a newcomer out, a peer that
//   has sent its first message outlasts any number of silent ones, and a
//   peer that completes its handshake within a round trip or two outlasts
//   a crowd stalled half-way unless that crowd is renewed faster than that
//   (a flood, which only a limit per source could answer);
// - memory per connection is what its Handshake reads, which the protocol
//   caps (net/frame_reader.h);
// - when the process runs out of file descriptors the listeners leave the
//   poll set for a while (net/accept.h) and the handshake that got least
//   far is dropped to free one, instead of spinning on a listener that
//   stays readable;
// - every line about a refused, dropped or timed-out connection goes
//   through a LogLimiter: a flood costs one line per period.
//
// The protocol lives in Handshake, one object per connection.
//
// Thread-safety: a Handshake's methods and the NewHandshake factory run on
// the gate's thread only, one connection at a time. The destructor stops
// the thread and closes the connections still in their handshake.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/log_limiter.h"
#include "base/status.h"
#include "base/status_or.h"
#include "net/unique_fd.h"

namespace ps::net {

// A handshake's reply fits the empty socket buffer of a new connection; a
// peer that does not take it within this long is not worth waiting for.
inline constexpr int kHandshakeReplySendMs = 200;
// The defaults of every listener's gate: seconds, not a peer timeout, and
// room for a few dozen workers starting at once beside a crowd.
inline constexpr int kDefaultHandshakeTimeoutMs = 5000;
inline constexpr size_t kDefaultMaxHandshakes = 128;

// One connection's handshake, as its protocol drives it.
class Handshake {
 public:
  enum class Next {
    kMore,   // wait for more bytes
    kDone,   // complete: Adopt takes the connection
    kClose,  // over without a word in the log (a port probe that hung up)
  };
  virtual ~Handshake() = default;

  // The socket is readable or hung up: read what is there from the
  // non-blocking `fd` and say what comes next; an error refuses the peer
  // (the gate closes it and logs why). Must not block: a reply goes out
  // with a short send deadline (a new connection's empty socket buffer
  // takes a handshake message at once).
  virtual StatusOr<Next> OnReadable(int fd) = 0;
  // After kDone: the connection, back in blocking mode, is the service's.
  virtual void Adopt(UniqueFd fd) = 0;
  // How far the peer got (0: nothing useful yet; more: further): when the
  // gate is full it drops a handshake that got least far.
  virtual int progress() const { return 0; }
  // Who the peer claims to be, escaped for a log line (base/printable.h);
  // empty when it has not said.
  virtual std::string claimed_name() const { return ""; }
};

class HandshakeGate {
 public:
  struct Options {
    // Names the service in log lines ("control listener 10.0.0.5:4000").
    std::string name;
    int handshake_timeout_ms = kDefaultHandshakeTimeoutMs;
    size_t max_handshakes = kDefaultMaxHandshakes;
  };
  // Makes the handshake of a connection that `listener` (an index into the
  // listeners given to Start) accepted from `address`.
  using NewHandshake = std::function<std::unique_ptr<Handshake>(
      size_t listener, int fd, const std::string& address)>;

  // Starts the thread; the listeners are made non-blocking.
  static StatusOr<std::unique_ptr<HandshakeGate>> Start(
      Options options, std::vector<UniqueFd> listeners,
      NewHandshake new_handshake);
  ~HandshakeGate();
  HandshakeGate(const HandshakeGate&) = delete;
  HandshakeGate& operator=(const HandshakeGate&) = delete;

 private:
  struct Pending;
  HandshakeGate(Options options, std::vector<UniqueFd> listeners,
                NewHandshake new_handshake);
  void Loop();
  // Accepts what `listener` has waiting; false when the process is out of
  // descriptors (the listeners pause).
  bool AcceptAll(size_t listener);
  // Moves one handshake on with what arrived; false when it is over.
  bool Advance(Pending& p);
  // Closes the handshake that got least far (the oldest of those) to make
  // room; `why` is for the log line.
  void DropOne(const char* why);

  const Options options_;
  std::vector<UniqueFd> listeners_;
  const NewHandshake new_handshake_;
  UniqueFd wake_;  // eventfd: the destructor stops the loop with it
  std::vector<std::unique_ptr<Pending>> pending_;  // the thread's, by age
  LogLimiter refused_log_{std::chrono::seconds(10)};
  LogLimiter dropped_log_{std::chrono::seconds(10)};
  LogLimiter descriptors_log_{std::chrono::seconds(10)};
  std::thread thread_;
};

}  // namespace ps::net
