// internal::StreamTransport: the origin side of a stream connection (TCP to a
// remote host, or the Unix socket to a same-host peer). Callers' threads send
// requests under a send lock; a reader thread matches replies to requests in
// order and completes them, writing Get data straight into the caller's
// buffer. An operation without a reply within the peer timeout declares the
// peer lost: every pending and later operation fails with kPeerLost.
//
// A tcp connection is a session (core/stream/stream_session.h): when it
// breaks (reset, closed) while the peer lives, the reader dials again,
// resumes the session and sends every request without a reply once more
// (from a copy of its bytes kept until the reply: callers may reuse their
// source buffers at once); the target executes each exactly once. The peer
// is lost when the new connection cannot be made within the peer timeout
// (counted from the last byte that moved), or when it restarted. Without a
// Reconnect (the same-host socket) a broken connection loses the peer.
//
// Replies are read by one thread at a time, the holder of the read lock:
// the reader thread, or a caller of Run (a blocking operation) that polls
// the socket itself while it waits. A polling caller saves the wake-up of
// the reader thread and the hand-over from it (on loopback most of an
// atomic's round trip). While callers poll, the reader thread parks; it
// takes over when nobody polls and replies are due, and does whatever a
// poller's read failed at (reconnecting, declaring the peer lost).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status_or.h"
#include "core/internal/transport.h"
#include "core/link_stats.h"
#include "core/stream/wire.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

class StreamTransport final : public Transport {
 public:
  // A new connection to the same peer, past the hello that resumes the
  // session, made before the deadline. kPeerLost (the peer restarted or
  // forgot the session) and kUnauthenticated are final; other errors are
  // tried again until the peer timeout.
  using Reconnect = std::function<StatusOr<net::UniqueFd>(net::Deadline)>;

  // `fd` is connected and past the hello; `reconnect` empty: a broken
  // connection loses the peer.
  // `counters` (null: none) count its reconnects and the loss of the peer
  // (core/link_stats.h).
  StreamTransport(net::UniqueFd fd, std::string peer_name,
                  std::chrono::milliseconds peer_timeout,
                  Reconnect reconnect = nullptr,
                  std::shared_ptr<LinkCounters> counters = nullptr);
  ~StreamTransport() override;

  Request Post(const Op& op) override;
  Request PostBatch(std::span<const Op> ops) override;
  Status Run(const Op& op) override;
  Status Flush() override;
  Status WriteFence() override;
  Status ReadFence() override;
  // Waits until every request posted before has its reply; kPeerLost once
  // lost, else OK (errors stay for Flush).
  Status Drain();
  // Inline: the shm transport asks before every mapped copy.
  bool lost() const override { return lost_->load(std::memory_order_acquire); }

  // Same-host connections: asks the target for the memfd of region
  // `region_id` (0: the target's liveness page), checked against key and
  // instance. Blocking.
  Status MapRegion(uint64_t region_id, uint64_t key, uint64_t instance,
                   wire::MapReply* reply, net::UniqueFd* memfd);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  const std::atomic<bool>* lost_;  // the Impl's flag
};

// The most redial tries StreamTransport makes within `peer_timeout` of one
// break: every try but the last is followed by a pause (10 ms, doubling up
// to 200 ms) or took at least 250 ms itself, and it stops once the peer
// timeout has passed since the last byte moved. A listener sizes the
// attempts it accepts from it (core/stream/session_resume.h).
uint64_t MaxRedialTries(std::chrono::milliseconds peer_timeout);

}  // namespace ps::xfer::internal
