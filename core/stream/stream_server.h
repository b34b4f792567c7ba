// internal::StreamServer: the target side of one stream connection. Its
// thread reads requests, checks each against the RegionTable, moves the data
// (Put payloads are received straight into the region), and answers every
// request only after its data is in place. A bad request gets an error reply
// and the connection goes on; a request that cannot be parsed closes this
// connection only. Nothing a peer sends can crash the process.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "core/internal/notification_ring.h"
#include "core/internal/region_table.h"
#include "core/stream/stream_session.h"
#include "core/stream/wire.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

// Answers a kMapRegion request (same-host connections only): fills `reply`
// and `*memfd` (a descriptor the server sends and does not close), or
// returns why not.
using MapRegionHandler = std::function<Status(
    const wire::RequestHeader& request, wire::MapReply* reply, int* memfd)>;

// Where a server queues the notification of each put-with-notify into a
// kNotifyEvents region (core/notification.h).
struct NotifyTarget {
  // Null: such puts are refused (kNotSupported).
  std::shared_ptr<NotificationRing> ring;
  uint64_t peer_instance = 0;  // the sender the notifications name
  // How long a put may wait for room in a full ring before it is refused
  // (kResourceExhausted): less than the origin's peer timeout, so the
  // refusal arrives before the origin gives up on us.
  std::chrono::milliseconds wait{0};
};

// The target of a connection from `peer_instance` in a context whose peer
// timeout is `peer_timeout_ms`: a full ring holds a put half of that.
inline NotifyTarget NotifyTargetFor(std::shared_ptr<NotificationRing> ring,
                                    uint64_t peer_instance,
                                    int peer_timeout_ms) {
  return {std::move(ring), peer_instance,
          std::chrono::milliseconds(peer_timeout_ms / 2)};
}

class StreamServer {
 public:
  // Starts serving `fd` (the hello is already done) on a new thread.
  // `map_region` is empty on connections that cannot pass descriptors;
  // `session` is null on connections that cannot be re-established.
  // `predecessor` (may be null) is the session's previous connection: the
  // new thread destroys it (stops and joins it) before it reads a request.
  StreamServer(net::UniqueFd fd, const RegionTable* regions,
               std::string peer_name, MapRegionHandler map_region,
               std::shared_ptr<StreamSession> session = nullptr,
               NotifyTarget notify = {},
               std::unique_ptr<StreamServer> predecessor = nullptr);
  // Stops (shuts the socket down) and joins the thread.
  ~StreamServer();
  // Shuts the socket down: the thread ends at its next read or write.
  void Shutdown();
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  const std::string& peer_name() const { return peer_name_; }
  // True once the peer disconnected or the connection was closed.
  bool finished() const { return finished_.load(); }
  const std::shared_ptr<StreamSession>& session() const { return session_; }

 private:
  class Connection;
  void Run();

  net::UniqueFd fd_;
  const RegionTable* regions_;
  const std::string peer_name_;
  MapRegionHandler map_region_;
  const std::shared_ptr<StreamSession> session_;
  const NotifyTarget notify_;
  std::unique_ptr<StreamServer> predecessor_;  // the thread's, until it ran
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace ps::xfer::internal
