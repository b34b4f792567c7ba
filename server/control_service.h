// ControlService: the server's end of the control channel
// (protocol/control_channel.h). A thread accepts TCP connections; each
// connection gets a thread that reads a ControlRequest, asks the handler for
// the reply and sends it, until the peer closes.
//
// Whatever a peer sends is input: a malformed or oversized message closes
// that connection with a log line and nothing else. Stop() closes the
// listener and every connection (shutdown(2) wakes the blocked reads) and
// joins all threads; connections never keep a stopping server alive.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "base/status_or.h"
#include "core/socket.h"
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
  // Binds host:port (port 0: any free port). kNetwork if it cannot.
  static StatusOr<std::unique_ptr<ControlService>> Listen(
      const std::string& host, uint16_t port, ControlHandler handler);
  ~ControlService();  // Stop()

  // "host:port" of the listener.
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }

  void Start();
  // Idempotent; callable from any thread except a connection's own (a
  // handler that wants the server to stop must signal another thread).
  void Stop();

 private:
  struct Connection {
    xfer::internal::UniqueFd fd;
    ControlPeer peer;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  ControlService() = default;
  void AcceptLoop();
  void Serve(Connection* c);
  void ReapFinished();  // mu_ held

  ControlHandler handler_;
  xfer::internal::UniqueFd listen_fd_;
  std::string address_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_;  // guarded by mu_
};

}  // namespace ps::server
