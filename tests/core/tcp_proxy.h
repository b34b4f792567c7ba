// TcpProxy: a loopback TCP relay between a test's connector and a real
// listener, that breaks the connections it carries on demand while both
// ends live: what a middlebox resetting connections does. Reset() sends a
// TCP reset to both ends of every relayed connection; while refusing, new
// connections are reset as they arrive (a peer that looks unreachable).
//
// Thread-safe: Reset and SetRefusing from any thread; one relay thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/unique_fd.h"

namespace ps::testing {

class TcpProxy {
 public:
  // Relays 127.0.0.1:<port()> to `target` ("host:port").
  explicit TcpProxy(std::string target);
  ~TcpProxy();

  std::string address() const;
  // Resets every connection relayed now.
  void Reset();
  // While on, every new connection is reset at once.
  void SetRefusing(bool on) { refusing_.store(on); }
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  struct Pair {
    net::UniqueFd client;
    net::UniqueFd server;
  };
  void Loop();

  const std::string target_;
  net::UniqueFd listen_;
  net::UniqueFd wake_;
  uint16_t port_ = 0;
  std::atomic<bool> refusing_{false};
  std::atomic<bool> reset_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace ps::testing
