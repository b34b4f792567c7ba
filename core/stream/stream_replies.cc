// The reply side of StreamTransport::Impl
// (core/stream/stream_transport_impl.h).
#include <glog/logging.h>

#include <utility>

#include "core/stream/stream_transport_impl.h"

namespace ps::xfer::internal {
namespace {

using wire::WireOp;

// How long the reader thread keeps off the socket after a caller last
// polled it (when no replies are due): a caller that runs one blocking
// operation after another then finds the read lock free each time. The
// reader thread looks again at least this often.
constexpr auto kHandBack = std::chrono::milliseconds(2);
constexpr long long kHandBackNs = 2'000'000;

}  // namespace

Status StreamTransport::Impl::Run(const Op& op) {
  Request request = Post(std::span<const Op>(&op, 1), false);
  // Counted once sent: a caller blocked in a send reads nothing, and the
  // reader thread must not wait for it (the peer may be blocked sending
  // replies that nobody reads).
  pollers_.fetch_add(1, std::memory_order_seq_cst);
  Status status;
  const bool done = SpinBriefly([&] {
    if (request.Test(&status)) return true;
    PollReplies();
    return request.Test(&status);
  });
  StopPolling();
  return done ? status : request.Wait();
}

void StreamTransport::Impl::PollReplies() {
  std::unique_lock read(read_mu_, std::try_to_lock);
  if (!read.owns_lock() || read_failed_.load(std::memory_order_relaxed) ||
      lost_.load(std::memory_order_seq_cst)) {
    return;  // the reader thread fails (or failed) what is pending
  }
  for (;;) {
    bool got = false;
    Status s = ReadOneReply(false, &got);
    if (!s.ok()) {
      read_failure_ = std::move(s);
      read_failed_.store(true, std::memory_order_seq_cst);
      WakeReader();
      return;
    }
    if (!got) return;
  }
}

void StreamTransport::Impl::StopPolling() {
  last_poll_ns_.store(MonotonicNanos(), std::memory_order_relaxed);
  pollers_.fetch_sub(1, std::memory_order_seq_cst);
  if (parked_.load(std::memory_order_seq_cst) &&
      completed_id_.load(std::memory_order_seq_cst) <
          posted_id_.load(std::memory_order_seq_cst)) {
    WakeReader();
  }
}

bool StreamTransport::Impl::ShouldPark() const {
  if (lost_.load(std::memory_order_seq_cst) ||
      read_failed_.load(std::memory_order_seq_cst)) {
    return false;
  }
  if (pollers_.load(std::memory_order_seq_cst) > 0) return true;
  return completed_id_.load(std::memory_order_seq_cst) >=
             posted_id_.load(std::memory_order_seq_cst) &&
         MonotonicNanos() - last_poll_ns_.load(std::memory_order_relaxed) <
             kHandBackNs;
}

void StreamTransport::Impl::ParkWhilePolled() {
  if (!ShouldPark()) return;
  std::unique_lock lock(park_mu_);
  parked_.store(true, std::memory_order_seq_cst);
  while (ShouldPark()) park_cv_.wait_for(lock, kHandBack);
  parked_.store(false, std::memory_order_relaxed);
}

void StreamTransport::Impl::ReadReplies() {
  for (;;) {
    ParkWhilePolled();
    // Held through a reconnect too: pollers stay off fd_ while it changes.
    std::lock_guard read(read_mu_);
    Status s;
    if (read_failed_.load(std::memory_order_relaxed)) {
      s = std::exchange(read_failure_, Status::OK());
      read_failed_.store(false, std::memory_order_relaxed);
    } else {
      bool got = false;
      s = ReadOneReply(true, &got);
    }
    if (s.ok()) continue;
    // An orderly close is how a peer that exits (or crashes with nothing
    // unread) ends its connections: it is lost at once. A reset may be the
    // network's doing, and is resumed.
    if (resumable() && Broken(s) && !lost() && !net::ClosedInOrder(fd_.get())) {
      s = Resume(s);
    }
    if (!s.ok()) {
      DeclareLost(s);
      break;
    }
  }
  // Under read_mu_: a poller inside ReadOneReply holds a pending entry that
  // FailAll is about to take away; once it is done, pollers see lost_.
  std::lock_guard read(read_mu_);
  FailAll();
}

Status StreamTransport::Impl::ReadOneReply(bool block, bool* got) {
  wire::ReplyHeader h;
  UniqueFd received;
  *got = false;
  if (block) {
    PS_RETURN_IF_ERROR(Recv(&h, sizeof(h), &received));
  } else {
    iovec iov{&h, sizeof(h)};
    size_t moved = 0;
    PS_RETURN_IF_ERROR(net::Transfer(fd_.get(), &iov, 1,
                                     {.direction = net::Direction::kRecv,
                                      .until_would_block = true,
                                      .watch = this,
                                      .received_fd = &received},
                                     &moved));
    if (moved == 0) return Status::OK();
    if (moved < sizeof(h)) {
      PS_RETURN_IF_ERROR(Recv(reinterpret_cast<char*>(&h) + moved,
                              sizeof(h) - moved, &received));
    }
  }
  *got = true;
  if (h.magic != wire::kReplyMagic) {
    return Corruption("bad reply magic from " + peer_);
  }
  // Only the holder of read_mu_ removes entries (this reader, or FailAll
  // under it), so `p` stays valid while mu_ is released (deque::push_back
  // keeps references).
  PendingReply* p;
  {
    std::lock_guard lock(mu_);
    if (pending_.empty() || pending_.front().id != h.request_id) {
      return Corruption("reply to unexpected request " +
                        std::to_string(h.request_id) + " from " + peer_);
    }
    p = &pending_.front();
  }
  Status result;
  if (h.status_code != 0) {
    std::string message(h.message_length, '\0');
    PS_RETURN_IF_ERROR(Recv(message.data(), message.size()));
    if (h.status_code > static_cast<uint16_t>(kLastStatusCode)) {
      return Corruption("unknown status code " + std::to_string(h.status_code) +
                        " from " + peer_);
    }
    result = Status(static_cast<StatusCode>(h.status_code), std::move(message));
    if (h.payload_length != 0) {
      return Corruption("error reply with payload from " + peer_);
    }
  } else {
    if (h.message_length != 0 || h.payload_length != p->expected_payload) {
      return Corruption("malformed reply to request " +
                        std::to_string(h.request_id) + " from " + peer_);
    }
    switch (p->op) {
      case WireOp::kGet:
      case WireOp::kReadV:
        PS_RETURN_IF_ERROR(RecvV(p->destination.data(), p->destination.size()));
        break;
      case WireOp::kFetchAdd:
      case WireOp::kCompareSwap:
        if (p->result != nullptr) *p->result = h.value;
        break;
      case WireOp::kMapRegion:
        PS_RETURN_IF_ERROR(Recv(p->map_reply, sizeof(wire::MapReply)));
        if (!received.valid()) {
          result = NetworkError("map reply from " + peer_ +
                                " came without a descriptor");
        } else {
          *p->map_fd = std::move(received);
        }
        break;
      default:
        break;
    }
  }
  // Complete before publishing completed_id_: a Flush that returns has
  // every earlier request done.
  p->state->Complete(result);
  KeptBytes done = std::move(p->replay);
  {
    std::lock_guard lock(mu_);
    pending_.pop_front();
    completed_id_.store(h.request_id, std::memory_order_release);
    if (!result.ok() && first_error_.ok()) first_error_ = std::move(result);
    if (flush_sleepers_ > 0) flushed_.notify_all();
  }
  kept_pool_.Give(std::move(done));
  return Status::OK();
}

void StreamTransport::Impl::FailAll() {
  std::deque<PendingReply> failed;
  Status why;
  {
    std::lock_guard lock(mu_);
    reader_done_ = true;  // no request is registered after this
    why = lost_reason_;
    failed.swap(pending_);
  }
  for (PendingReply& p : failed) p.state->Complete(why);
  std::lock_guard lock(mu_);
  completed_id_.store(posted_id_.load(std::memory_order_relaxed),
                      std::memory_order_release);
  if (!failed.empty() && first_error_.ok()) first_error_ = why;
  flushed_.notify_all();
}

}  // namespace ps::xfer::internal
