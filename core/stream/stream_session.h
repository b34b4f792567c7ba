// internal::StreamSession: what the target of a tcp stream remembers about
// one origin's session, so that a broken connection can be re-established
// and every request completes exactly once. Request ids count up across the
// session's connections; the origin sends again, on the new connection,
// every request it has no reply to. The target then
//   - executes a request it has not seen (id above applied_through);
//   - answers a write or atomic it already executed from the reply it sent
//     (kept until the origin acknowledges it, RequestHeader::acked_through),
//     without executing it again: a fetch-add adds once;
//   - reads again for a Get or ReadV (a read has no effect to repeat).
//
// Thread-safety: one StreamServer uses a session at a time (the provider
// stops the old connection's server before the new one starts); the
// provider's bookkeeping (attached, broken_at) is guarded by its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "core/stream/wire.h"

namespace ps::xfer::internal {

class StreamSession {
 public:
  struct StoredReply {
    uint64_t request_id = 0;
    uint16_t status_code = 0;
    uint64_t value = 0;
    std::string message;
  };

  StreamSession(uint64_t id, uint64_t peer_instance)
      : id_(id), peer_instance_(peer_instance) {}

  uint64_t id() const { return id_; }
  uint64_t peer_instance() const { return peer_instance_; }

  // True for a request executed on an earlier connection of the session.
  bool Executed(uint64_t request_id) const {
    return request_id <= applied_through_;
  }
  // Notes that `request_id` was executed; `reply` (writes and atomics only)
  // is what to answer if the origin sends it again.
  void Record(uint64_t request_id, const StoredReply* reply) {
    if (request_id > applied_through_) applied_through_ = request_id;
    if (reply != nullptr) replies_.push_back(*reply);
  }
  // The reply recorded for `request_id`, or null.
  const StoredReply* Find(uint64_t request_id) const {
    for (const StoredReply& r : replies_) {
      if (r.request_id == request_id) return &r;
    }
    return nullptr;
  }
  // Forgets replies the origin has received.
  void Acknowledge(uint64_t acked_through) {
    while (!replies_.empty() && replies_.front().request_id <= acked_through) {
      replies_.pop_front();
    }
  }

 private:
  const uint64_t id_;
  const uint64_t peer_instance_;
  uint64_t applied_through_ = 0;
  std::deque<StoredReply> replies_;  // by request id, ascending
};

}  // namespace ps::xfer::internal
