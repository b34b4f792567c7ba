// TcpProxy: a loopback TCP relay between a test's connector and a real
// listener, that breaks the connections it carries on demand while both
// ends live: what a middlebox resetting connections does. Reset() sends a
// TCP reset to both ends of every relayed connection; while refusing, new
// connections are reset as they arrive (a peer that looks unreachable);
// while dropping replies (or requests), what the listener (the connector)
// sends is read and thrown away (lost on the way). It also keeps the first
// bytes each connection carried either way: what an eavesdropper on the path
// sees.
//
// Thread-safe: every method from any thread; one relay thread.
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
  // While on, the bytes from the listener are dropped, not relayed.
  void SetDroppingReplies(bool on) { dropping_.store(on); }
  // While on, the bytes from the connector are dropped, not relayed (a
  // request lost on the way: the listener waits for it).
  void SetDroppingRequests(bool on) { dropping_requests_.store(on); }
  // Bytes dropped so far.
  uint64_t dropped() const { return dropped_.load(); }
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

  // The first kCapturedBytes each relayed connection carried from the
  // connector (client) and from the listener (server), in the order they
  // were accepted.
  static constexpr size_t kCapturedBytes = 16 << 10;
  struct Captured {
    std::string from_client;
    std::string from_server;
  };
  std::vector<Captured> captured() const;

 private:
  struct Pair {
    net::UniqueFd client;
    net::UniqueFd server;
    size_t index = 0;  // in captured_
  };
  // Keeps the start of what `pair` relayed from `side` (0: the client).
  void Capture(const Pair& pair, int side, const char* data, size_t n);
  void Loop();

  const std::string target_;
  net::UniqueFd listen_;
  net::UniqueFd wake_;
  uint16_t port_ = 0;
  std::atomic<bool> refusing_{false};
  std::atomic<bool> dropping_{false};
  std::atomic<bool> dropping_requests_{false};
  std::atomic<uint64_t> dropped_{0};
  mutable std::mutex captured_mu_;
  std::vector<Captured> captured_;  // guarded by captured_mu_
  std::atomic<bool> reset_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace ps::testing
