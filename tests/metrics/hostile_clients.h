// What the metrics tests attack an exporter's port with, and how they see
// what it costs the server:
//   - Slowloris: connections that each send a partial request head, one
//     byte every `drip_every`, and never finish it; a connection the server
//     closes is opened again at once (within a 10 ms tick), as an attacker
//     would;
//   - OpenIdleConnections: connections that send nothing;
//   - OpenDescriptors: the descriptors a process holds (/proc/PID/fd).
//
// Thread-safety: a Slowloris runs its own thread; its counters may be read
// from any thread. The functions share no state.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status_or.h"
#include "net/unique_fd.h"

namespace ps::testing {

class Slowloris {
 public:
  // Opens `connections` connections to `address` ("host:port", host an
  // IPv4 or IPv6 address) and keeps them dripping until destroyed.
  static StatusOr<std::unique_ptr<Slowloris>> Start(
      const std::string& address, size_t connections,
      std::chrono::milliseconds drip_every);
  ~Slowloris() { Stop(); }
  Slowloris(const Slowloris&) = delete;
  Slowloris& operator=(const Slowloris&) = delete;

  // Stops the thread and closes every connection; the counters stay.
  void Stop();

  // Connections opened, the first ones and the re-opened ones.
  uint64_t opened() const { return opened_.load(); }
  // Connections the server closed (each then re-opened).
  uint64_t closed_by_server() const { return closed_.load(); }
  // Bytes the server took (one per drip).
  uint64_t dripped() const { return dripped_.load(); }

 private:
  Slowloris() = default;
  void Run();

  std::vector<uint8_t> address_;  // a sockaddr_storage's bytes
  size_t connections_ = 0;
  std::chrono::milliseconds drip_every_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> opened_{0};
  std::atomic<uint64_t> closed_{0};
  std::atomic<uint64_t> dripped_{0};
  std::thread thread_;
};

// `count` connections to `address` that send nothing (non-blocking
// connects: those the listener's backlog cannot take yet keep trying in
// the kernel). They close when the vector dies.
StatusOr<std::vector<net::UniqueFd>> OpenIdleConnections(
    const std::string& address, size_t count);

// The descriptors process `pid` holds now; -1 if /proc/PID/fd is unreadable.
int OpenDescriptors(pid_t pid);

}  // namespace ps::testing
