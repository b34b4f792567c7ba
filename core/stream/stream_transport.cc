#include "core/stream/stream_transport.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/internal/request_state.h"
#include "core/stream/request_encoder.h"
#include "net/transfer.h"

namespace ps::xfer::internal {
namespace {

using net::UniqueFd;
using wire::WireOp;

constexpr int kSocketBufferBytes = 4 << 20;

}  // namespace

class StreamTransport::Impl : private net::TransferWatch {
 public:
  Impl(UniqueFd fd, std::string peer_name,
       std::chrono::milliseconds peer_timeout)
      : fd_(std::move(fd)),
        peer_(std::move(peer_name)),
        timeout_ms_(peer_timeout.count()),
        timeout_ns_(static_cast<long long>(peer_timeout.count()) * 1'000'000),
        last_progress_ns_(MonotonicNanos()) {
    int size = kSocketBufferBytes;
    setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    // Blocking calls wake up every tick to check for a stalled peer.
    long long tick_ms = std::clamp<long long>(timeout_ms_ / 4, 1, 100);
    timeval tick{static_cast<time_t>(tick_ms / 1000),
                 static_cast<suseconds_t>(tick_ms % 1000 * 1000)};
    setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick));
    setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tick, sizeof(tick));
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

  // The watch of every transfer on the socket: a stalled peer (nothing
  // moved for the peer timeout with requests outstanding) ends a transfer
  // blocked on it at the next socket timeout tick.
  void OnProgress() override { NoteProgress(); }
  Status OnIdle() override { return Stalled() ? StallStatus() : Status::OK(); }

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

  UniqueFd fd_;
  const std::string peer_;
  const long long timeout_ms_;
  const long long timeout_ns_;
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
    for (size_t i = 0; i < m.pending.size(); ++i) {
      m.pending[i].id = m.headers[i].request_id = next_id_++;
      pending_.push_back(std::move(m.pending[i]));
    }
    // Before publishing the new ids, so the reader's stall check measures
    // from now rather than from an idle period.
    NoteProgress();
    posted_id_.store(next_id_ - 1, std::memory_order_release);
  }
  Status s = SendV(m.iov.data(), m.iov.size());
  if (!s.ok()) {
    // The stream may hold half a request: nothing after it can be parsed.
    // The reader fails every pending request, ours included.
    DeclareLost(s);
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
  {
    std::lock_guard lock(mu_);
    if (!lost_.load(std::memory_order_relaxed)) {
      lost_reason_ = PeerLost("peer " + peer_ + " lost: " + why.message());
      lost_.store(true, std::memory_order_release);
    }
  }
  // Wakes the reader (and any sender) blocked on the socket.
  shutdown(fd_.get(), SHUT_RDWR);
}

void StreamTransport::Impl::ReadReplies() {
  for (;;) {
    Status s = ReadOneReply();
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
    return NetworkError("bad reply magic from " + peer_);
  }
  // Only this thread removes entries, so `p` stays valid while the lock is
  // released (deque::push_back keeps references).
  PendingReply* p;
  {
    std::lock_guard lock(mu_);
    if (pending_.empty() || pending_.front().id != h.request_id) {
      return NetworkError("reply to unexpected request " +
                          std::to_string(h.request_id) + " from " + peer_);
    }
    p = &pending_.front();
  }
  Status result;
  if (h.status_code != 0) {
    std::string message(h.message_length, '\0');
    PS_RETURN_IF_ERROR(Recv(message.data(), message.size()));
    if (h.status_code > static_cast<uint16_t>(kLastStatusCode)) {
      return NetworkError("unknown status code " +
                          std::to_string(h.status_code) + " from " + peer_);
    }
    result = Status(static_cast<StatusCode>(h.status_code), std::move(message));
    if (h.payload_length != 0) {
      return NetworkError("error reply with payload from " + peer_);
    }
  } else {
    if (h.message_length != 0 || h.payload_length != p->expected_payload) {
      return NetworkError("malformed reply to request " +
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
  {
    std::lock_guard lock(mu_);
    pending_.pop_front();
    completed_id_.store(h.request_id, std::memory_order_release);
    if (!result.ok() && first_error_.ok()) first_error_ = std::move(result);
    if (flush_sleepers_ > 0) flushed_.notify_all();
  }
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
                                 std::chrono::milliseconds peer_timeout)
    : impl_(std::make_unique<Impl>(std::move(fd), std::move(peer_name),
                                   peer_timeout)) {}

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
