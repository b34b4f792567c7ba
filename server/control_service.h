// ControlService: the server's end of the control channel
// (protocol/control_channel.h). A thread accepts TCP connections; each
// connection gets a thread that reads a ControlRequest, asks the handler for
// the reply and sends it, until the peer closes.
//
// Whatever a peer sends is input, and no peer can deny the others:
// - at most Options::max_connections connections at once; one more is
//   answered with an error and closed at once;
// - a connection must send its first request (with a secret: prove it)
//   within timeout_ms, and a message that started must be whole within its
//   deadline (protocol::BodyDeadlineMs); memory follows the bytes received;
// - with a cluster secret, nothing but the AUTH exchange is answered until
//   the peer proved the secret; a failed proof is logged with the peer's
//   address and closes the connection;
// - a malformed or oversized message closes that connection with a log line.
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
#include <string>
#include <thread>

#include "base/status.h"
#include "base/status_or.h"
#include "core/auth.h"
#include "net/unique_fd.h"
#include "protocol/ps.pb.h"

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
    uint32_t max_connections = 64;
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

  void Start();
  // Idempotent; callable from any thread except a connection's own (a
  // handler that wants the server to stop must signal another thread).
  void Stop();

 private:
  struct Connection;

  ControlService() = default;
  void AcceptLoop();
  void KeepaliveLoop();
  void Serve(Connection* c);
  // Answers an AUTH request on `c`; false when the connection must close.
  bool Authenticate(Connection* c, const proto::AuthRequest& auth,
                    proto::ControlReply* reply);
  void ReapFinished();  // mu_ held

  Options options_;
  ControlHandler handler_;
  net::UniqueFd listen_fd_;
  std::string address_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::thread keepalive_thread_;
  std::mutex mu_;
  std::condition_variable stop_cv_;  // wakes the keepalive thread
  std::list<std::unique_ptr<Connection>> connections_;  // guarded by mu_
};

}  // namespace ps::server
