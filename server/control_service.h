// ControlService: the server's end of the control channel
// (protocol/control_channel.h). A net::HandshakeGate accepts TCP connections
// and runs each one's handshake (server/control_handshake.h) on one thread;
// each established connection gets a thread that reads a ControlRequest,
// asks the handler for the reply and sends it, until the peer closes.
//
// Whatever a peer sends is input, and no peer can deny the others:
// - before its handshake is complete (with a secret: until it proved the
//   secret; without one: until its first message) a connection costs one
//   of Options::max_handshakes slots on the gate's thread, for at most
//   Options::handshake_timeout_ms, and memory for one message of at most
//   protocol::kMaxHandshakeMessageBytes; nothing but the handshake is
//   answered. When the slots are full a newcomer drops the handshake that
//   got least far: silent or stalled connections cannot keep out a peer
//   that knows the secret (net/handshake_gate.h says how far that holds);
// - at most Options::max_connections established connections; one more is
//   told why (kResourceExhausted) at the end of its handshake and closed;
// - an established connection's message that started must be whole within
//   its deadline (protocol::BodyDeadlineMs); memory follows the bytes
//   received;
// - a failed proof, a malformed or oversized message closes that connection
//   with a log line, at most one such line per period however many come.
// While the handler works on a request, a keepalive frame goes to its client
// every protocol::kKeepaliveIntervalMs, so that a slow request (a cut
// waiting for the previous checkpoint) is not taken for a dead server.
//
// Stop() closes the listener and every connection (shutdown(2) wakes the
// blocked reads) and joins all threads; a handler still working must return
// by itself (the server cancels what could block before it calls Stop).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/log_limiter.h"
#include "base/status.h"
#include "base/status_or.h"
#include "core/auth.h"
#include "net/handshake_gate.h"
#include "net/unique_fd.h"
#include "protocol/ps.pb.h"
#include "server/control_handshake.h"

namespace ps::server {

// What a handler knows about the connection a request came on.
struct ControlPeer {
  std::string address;     // "127.0.0.1:53422"
  int64_t worker_id = -1;  // set by the handler after a hello
};

using ControlHandler = std::function<proto::ControlReply(
    const proto::ControlRequest& request, ControlPeer* peer)>;

class ControlService {
 public:
  struct Options {
    std::string host = "127.0.0.1";  // bound; may be 0.0.0.0 or ::
    uint16_t port = 0;               // 0: any free port
    // What address() names; empty: derived from host (net/advertise.h).
    std::string advertise_host;
    xfer::ClusterSecret secret;
    int timeout_ms = 30000;
    uint32_t max_connections = 64;  // established ones
    // Connections still in their handshake: their deadline, and how many
    // at once.
    int handshake_timeout_ms = net::kDefaultHandshakeTimeoutMs;
    size_t max_handshakes = net::kDefaultMaxHandshakes;
    // Called on the connection's thread once it closed (for the server's
    // record of which workers are connected); may be empty.
    std::function<void(const ControlPeer& peer)> on_close;
  };
  // Binds host:port. kNetwork if it cannot; kInvalidArgument for a
  // non-loopback host without a secret.
  static StatusOr<std::unique_ptr<ControlService>> Listen(
      Options options, ControlHandler handler);
  ~ControlService();  // Stop()

  // "host:port" peers dial: the advertised host and the bound port.
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }

  // Starts accepting (the gate's thread) and the keepalive thread.
  Status Start();
  // Idempotent; callable from any thread except a connection's own (a
  // handler that wants the server to stop must signal another thread).
  void Stop();

 private:
  struct Connection;

  ControlService() = default;
  // The gate's: may one more connection be established?
  Status Admit();
  // The gate's: serve an established connection on a thread of its own.
  void Adopt(net::UniqueFd fd, std::optional<proto::ControlRequest> first);
  void KeepaliveLoop();
  void Serve(Connection* c, std::optional<proto::ControlRequest> first);
  void ReapFinished();  // mu_ held

  Options options_;
  ControlHandler handler_;
  net::UniqueFd listen_fd_;  // until Start hands it to the gate
  std::string address_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  ControlHandshake::Service handshake_;  // what each handshake asks of us
  std::thread keepalive_thread_;
  std::mutex mu_;
  std::condition_variable stop_cv_;  // wakes the keepalive thread
  std::list<std::unique_ptr<Connection>> connections_;  // guarded by mu_
  LogLimiter closed_log_{std::chrono::seconds(10)};
  LogLimiter no_thread_log_{std::chrono::seconds(10)};
  // Last: destroyed first (Stop resets it before anything else goes), so
  // its thread, which calls Admit and Adopt, never outlives what they use.
  std::unique_ptr<net::HandshakeGate> gate_;
};

}  // namespace ps::server
