#include "core/stream/stream_transport.h"

#include <glog/logging.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/internal/request_state.h"
#include "core/stream/request_encoder.h"
#include "net/connect.h"
#include "net/socket_error.h"
#include "net/transfer.h"

namespace ps::xfer::internal {
namespace {

using net::UniqueFd;
using wire::WireOp;

constexpr int kSocketBufferBytes = 4 << 20;
// How long sent bytes may go unacknowledged (with requests outstanding)
// before the path counts as down and the connection is dialed again: three
// of Linux's minimum retransmission timeouts.
constexpr uint32_t kPathStallMs = 600;
// Free copy buffers a connection keeps for its next requests.
constexpr size_t kKeptPoolBytes = size_t{32} << 20;

// Sets the id and acknowledgement of a request kept as bytes (its header
// first) for sending again.
void PatchKeptHeader(KeptBytes& kept, uint64_t id, uint64_t acked) {
  std::memcpy(kept.data() + offsetof(wire::RequestHeader, request_id), &id,
              sizeof(id));
  std::memcpy(kept.data() + offsetof(wire::RequestHeader, acked_through),
              &acked, sizeof(acked));
}

}  // namespace

class StreamTransport::Impl : private net::TransferWatch {
 public:
  Impl(UniqueFd fd, std::string peer_name,
       std::chrono::milliseconds peer_timeout, Reconnect reconnect)
      : fd_(std::move(fd)),
        peer_(std::move(peer_name)),
        timeout_ms_(peer_timeout.count()),
        timeout_ns_(static_cast<long long>(peer_timeout.count()) * 1'000'000),
        reconnect_(std::move(reconnect)),
        last_progress_ns_(MonotonicNanos()) {
    ConfigureSocket(fd_.get());
    reader_ = std::thread([this] { ReadReplies(); });
  }

  ~Impl() override {
    DeclareLost(PeerLost("the endpoint was closed"));
    reader_.join();
  }

  Request Post(std::span<const Op> ops);
  Status Flush();
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  Status MapRegion(uint64_t region_id, uint64_t key, uint64_t instance,
                   wire::MapReply* reply, UniqueFd* memfd);

 private:
  Request Send(OutgoingMessage& m, const std::shared_ptr<RequestState>& state);

  void ConfigureSocket(int fd) const {
    int size = kSocketBufferBytes;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    // Blocking calls wake up every tick to check for a stalled peer.
    long long tick_ms = std::clamp<long long>(timeout_ms_ / 4, 1, 100);
    timeval tick{static_cast<time_t>(tick_ms / 1000),
                 static_cast<suseconds_t>(tick_ms % 1000 * 1000)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tick, sizeof(tick));
  }
  bool resumable() const { return static_cast<bool>(reconnect_); }
  // A broken connection (not a stall, not a protocol error) that a new
  // one may replace.
  static bool Broken(const Status& s) { return net::IsBrokenConnection(s); }
  // Keeps a copy of each request's bytes (iovecs [first[i], first[i+1]))
  // for sending again after a reconnect.
  void KeepCopies(OutgoingMessage& m);
  // Replaces the broken connection and sends every request without a reply
  // again; an error: the peer is lost. The reader's thread, under send_mu_.
  Status Resume(const Status& why);
  // Sends every pending request again on the new connection (Resume).
  Status SendPendingAgain(size_t* resent);

  void ReadReplies();
  Status ReadOneReply();
  void FailAll();
  void DeclareLost(const Status& why);
  Status LostStatus();

  void NoteProgress() {
    last_progress_ns_.store(MonotonicNanos(), std::memory_order_relaxed);
  }
  // True when requests are outstanding and nothing moved for the timeout.
  bool Stalled() const {
    if (completed_id_.load(std::memory_order_acquire) >=
        posted_id_.load(std::memory_order_acquire)) {
      return false;
    }
    return MonotonicNanos() -
               last_progress_ns_.load(std::memory_order_relaxed) >=
           timeout_ns_;
  }
  Status StallStatus() const {
    return Timeout("no progress for " + std::to_string(timeout_ms_) +
                   " ms with requests outstanding");
  }

  // True when requests are outstanding and what we sent (or queued) has
  // gone unacknowledged for kPathStallMs (or 4 round trips, if longer): the
  // path is down (a partition), not the peer busy (its kernel would ack).
  bool PathStalled() const {
    if (!resumable() || completed_id_.load(std::memory_order_acquire) >=
                            posted_id_.load(std::memory_order_acquire)) {
      return false;
    }
    const net::TcpPath path = net::TcpPathOf(fd_.get());
    return (path.unacked > 0 || path.unsent_bytes > 0) &&
           path.ms_since_ack >=
               std::max<uint32_t>(kPathStallMs, 4 * path.rtt_us / 1000);
  }

  // The watch of every transfer on the socket: a stalled peer (nothing
  // moved for the peer timeout with requests outstanding) ends a transfer
  // blocked on it at the next socket timeout tick. A stalled path ends it
  // as a broken connection: the reader dials again, and a new connection
  // goes through as soon as the path is back, without waiting for TCP's
  // backed-off retransmission timer on the old one.
  void OnProgress() override { NoteProgress(); }
  Status OnIdle() override {
    if (Stalled()) return StallStatus();
    if (PathStalled()) {
      return NetworkError("nothing acknowledged by " + peer_ + " for " +
                          std::to_string(kPathStallMs) +
                          " ms: the path is down");
    }
    return Status::OK();
  }

  // Every byte of the iovecs, or why not (a stall, a lost peer).
  Status SendV(iovec* iov, size_t count) {
    return net::Transfer(fd_.get(), iov, count,
                         {.direction = net::Direction::kSend, .watch = this});
  }
  // Receives into the iovecs; a descriptor that comes along goes to
  // *received_fd (none is accepted when it is null).
  Status RecvV(iovec* iov, size_t count, UniqueFd* received_fd = nullptr) {
    return net::Transfer(fd_.get(), iov, count,
                         {.direction = net::Direction::kRecv,
                          .flags = MSG_WAITALL,
                          .watch = this,
                          .received_fd = received_fd});
  }
  Status Recv(void* data, size_t len, UniqueFd* received_fd = nullptr) {
    iovec iov{data, len};
    return RecvV(&iov, 1, received_fd);
  }

  UniqueFd fd_;  // replaced by Resume, holding send_mu_ and mu_
  const std::string peer_;
  const long long timeout_ms_;
  const long long timeout_ns_;
  const Reconnect reconnect_;
  KeptBytesPool kept_pool_{kKeptPoolBytes};
  std::atomic<long long> last_progress_ns_;

  std::mutex send_mu_;    // serializes whole requests on the socket
  uint64_t next_id_ = 1;  // guarded by send_mu_

  mutable std::mutex mu_;
  std::condition_variable flushed_;
  std::deque<PendingReply> pending_;  // guarded by mu_, in wire order
  bool reader_done_ = false;          // guarded by mu_
  Status lost_reason_;                // guarded by mu_
  Status first_error_;                // guarded by mu_: since the last Flush
  int flush_sleepers_ = 0;            // guarded by mu_
  // Highest request id registered / completed (replies come in order).
  std::atomic<uint64_t> posted_id_{0};
  std::atomic<uint64_t> completed_id_{0};
  std::atomic<bool> lost_{false};

  std::thread reader_;
};

Request StreamTransport::Impl::Send(
    OutgoingMessage& m, const std::shared_ptr<RequestState>& state) {
  std::lock_guard send_lock(send_mu_);
  {
    std::lock_guard lock(mu_);
    if (lost_.load(std::memory_order_relaxed) || reader_done_) {
      return Request(lost_reason_);
    }
    const uint64_t acked = completed_id_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < m.pending.size(); ++i) {
      PendingReply& p = m.pending[i];
      p.id = m.headers[i].request_id = next_id_++;
      m.headers[i].acked_through = acked;
      if (!p.replay.empty()) PatchKeptHeader(p.replay, p.id, acked);
      pending_.push_back(std::move(p));
    }
    // Before publishing the new ids, so the reader's stall check measures
    // from now rather than from an idle period.
    NoteProgress();
    posted_id_.store(next_id_ - 1, std::memory_order_release);
  }
  Status s = SendV(m.iov.data(), m.iov.size());
  if (!s.ok()) {
    if (resumable() && Broken(s)) {
      // The reader sees the connection end, reconnects and sends our
      // requests again (they are pending, with their copies).
      shutdown(fd_.get(), SHUT_RDWR);
    } else {
      // The stream may hold half a request: nothing after it can be
      // parsed. The reader fails every pending request, ours included.
      DeclareLost(s);
    }
  }
  return Request(state);
}

Request StreamTransport::Impl::Post(std::span<const Op> ops) {
  if (ops.empty()) return Request();
  if (lost()) return Request(LostStatus());
  auto state = std::make_shared<RequestState>(static_cast<int>(ops.size()));
  OutgoingMessage m;
  m.Reserve(ops.size());
  for (const Op& op : ops) {
    Status s = EncodeOp(op, peer_, state, &m);
    if (!s.ok()) return Request(std::move(s));
  }
  if (resumable()) KeepCopies(m);
  return Send(m, state);
}

Status StreamTransport::Impl::MapRegion(uint64_t region_id, uint64_t key,
                                        uint64_t instance,
                                        wire::MapReply* reply,
                                        UniqueFd* memfd) {
  if (lost()) return LostStatus();
  auto state = std::make_shared<RequestState>();
  OutgoingMessage m;
  EncodeMapRegion(region_id, key, instance, reply, memfd, state, &m);
  return Send(m, state).Wait();
}

Status StreamTransport::Impl::Flush() {
  const uint64_t target = posted_id_.load(std::memory_order_acquire);
  auto caught_up = [&] {
    return completed_id_.load(std::memory_order_acquire) >= target;
  };
  std::unique_lock lock(mu_);
  if (!caught_up()) {
    lock.unlock();
    bool done = SpinBriefly(caught_up);
    lock.lock();
    if (!done) {
      ++flush_sleepers_;
      flushed_.wait(lock, caught_up);
      --flush_sleepers_;
    }
  }
  Status first = std::exchange(first_error_, Status::OK());
  if (first.ok() && lost_.load(std::memory_order_relaxed)) first = lost_reason_;
  return first;
}

Status StreamTransport::Impl::LostStatus() {
  std::lock_guard lock(mu_);
  return lost_reason_;
}

void StreamTransport::Impl::DeclareLost(const Status& why) {
  std::lock_guard lock(mu_);  // also against Resume replacing fd_
  if (!lost_.load(std::memory_order_relaxed)) {
    lost_reason_ = PeerLost("peer " + peer_ + " lost: " + why.message());
    lost_.store(true, std::memory_order_release);
  }
  // Wakes the reader (and any sender) blocked on the socket.
  shutdown(fd_.get(), SHUT_RDWR);
}

void StreamTransport::Impl::KeepCopies(OutgoingMessage& m) {
  for (size_t i = 0; i < m.pending.size(); ++i) {
    const size_t end =
        i + 1 < m.first_iov.size() ? m.first_iov[i + 1] : m.iov.size();
    size_t bytes = 0;
    for (size_t k = m.first_iov[i]; k < end; ++k) bytes += m.iov[k].iov_len;
    KeptBytes& copy = m.pending[i].replay;
    copy = kept_pool_.Take(bytes);
    char* out = copy.data();
    for (size_t k = m.first_iov[i]; k < end; ++k) {
      std::memcpy(out, m.iov[k].iov_base, m.iov[k].iov_len);
      out += m.iov[k].iov_len;
    }
  }
}

Status StreamTransport::Impl::Resume(const Status& why) {
  std::lock_guard send_lock(send_mu_);  // senders wait for the new socket
  const auto started = std::chrono::steady_clock::now();
  LOG(WARNING) << "xfer: connection to " << peer_ << " broke (" << why
               << "); re-establishing it";
  auto sleep = std::chrono::milliseconds(10);
  const std::chrono::microseconds attempt =
      std::clamp<std::chrono::microseconds>(
          std::chrono::microseconds(8 *
                                    uint64_t{net::TcpPathOf(fd_.get()).rtt_us}),
          std::chrono::milliseconds(250), std::chrono::seconds(1));
  Status last = why;
  int attempts = 0;
  for (;;) {
    if (lost()) return LostStatus();
    // The peer timeout counts from the last byte that moved.
    const long long left_ns =
        timeout_ns_ -
        (MonotonicNanos() - last_progress_ns_.load(std::memory_order_relaxed));
    if (left_ns <= 0) {
      return Timeout("could not re-establish the connection within " +
                     std::to_string(timeout_ms_) + " ms (" +
                     std::to_string(attempts) +
                     " attempts; last: " + last.ToString() + ")");
    }
    ++attempts;
    // One attempt waits a few round trips (at least 250 ms, at most a
    // second): a SYN lost to a partition is sent afresh by the next attempt
    // soon after the path is back, and a close (the destructor) is not held
    // up for the whole timeout.
    const auto attempt_start = std::chrono::steady_clock::now();
    StatusOr<UniqueFd> fd =
        reconnect_(net::Deadline::clock::now() +
                   std::min<std::chrono::nanoseconds>(
                       std::chrono::nanoseconds(left_ns), attempt));
    if (!fd.ok()) {
      // A restarted peer, a refused session or a refused proof: final.
      if (fd.status().Is(StatusCode::kPeerLost) ||
          fd.status().Is(StatusCode::kUnauthenticated)) {
        return fd.status();
      }
      last = fd.status();
      // An attempt that waited out its time tries again at once; one that
      // was refused at once waits a little, more each time.
      if (std::chrono::steady_clock::now() - attempt_start < attempt) {
        std::this_thread::sleep_for(std::min(
            sleep, std::chrono::milliseconds(left_ns / 1'000'000 + 1)));
        sleep = std::min(sleep * 2, std::chrono::milliseconds(200));
      }
      continue;
    }
    ConfigureSocket(fd->get());
    {
      std::lock_guard lock(mu_);
      if (lost_.load(std::memory_order_relaxed)) return lost_reason_;
      fd_ = std::move(*fd);
    }
    size_t resent = 0;
    Status s = SendPendingAgain(&resent);
    if (!s.ok()) {
      if (!Broken(s)) return s;
      last = s;
      continue;  // broke again: dial again
    }
    NoteProgress();
    LOG(INFO) << "xfer: connection to " << peer_ << " re-established after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count()
              << " ms (" << attempts << " attempts); " << resent
              << " requests sent again";
    return Status::OK();
  }
}

Status StreamTransport::Impl::SendPendingAgain(size_t* resent) {
  // Only this thread removes pending entries, and senders wait on send_mu_
  // (held by Resume): the list is stable while we walk it.
  const uint64_t acked = completed_id_.load(std::memory_order_relaxed);
  *resent = 0;
  for (PendingReply& p : pending_) {
    PatchKeptHeader(p.replay, p.id, acked);
    iovec iov{p.replay.data(), p.replay.size()};
    PS_RETURN_IF_ERROR(SendV(&iov, 1));
    ++*resent;
  }
  return Status::OK();
}

void StreamTransport::Impl::ReadReplies() {
  for (;;) {
    Status s = ReadOneReply();
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
  FailAll();
}

Status StreamTransport::Impl::ReadOneReply() {
  wire::ReplyHeader h;
  UniqueFd received;
  PS_RETURN_IF_ERROR(Recv(&h, sizeof(h), &received));
  if (h.magic != wire::kReplyMagic) {
    return Corruption("bad reply magic from " + peer_);
  }
  // Only this thread removes entries, so `p` stays valid while the lock is
  // released (deque::push_back keeps references).
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

StreamTransport::StreamTransport(UniqueFd fd, std::string peer_name,
                                 std::chrono::milliseconds peer_timeout,
                                 Reconnect reconnect)
    : impl_(std::make_unique<Impl>(std::move(fd), std::move(peer_name),
                                   peer_timeout, std::move(reconnect))) {}

StreamTransport::~StreamTransport() = default;

Request StreamTransport::Post(const Op& op) {
  return impl_->Post(std::span<const Op>(&op, 1));
}

Request StreamTransport::PostBatch(std::span<const Op> ops) {
  return impl_->Post(ops);
}

Status StreamTransport::Flush() { return impl_->Flush(); }

bool StreamTransport::lost() const { return impl_->lost(); }

Status StreamTransport::MapRegion(uint64_t region_id, uint64_t key,
                                  uint64_t instance, wire::MapReply* reply,
                                  UniqueFd* memfd) {
  return impl_->MapRegion(region_id, key, instance, reply, memfd);
}

}  // namespace ps::xfer::internal
