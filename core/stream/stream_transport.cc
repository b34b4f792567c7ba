#include "core/stream/stream_transport.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/internal/request_state.h"

namespace ps::xfer::internal {
namespace {

using wire::WireOp;

constexpr int kSocketBufferBytes = 4 << 20;

Status SocketError(const char* what, int err) {
  bool lost =
      err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ESHUTDOWN;
  return ErrnoStatus(lost ? StatusCode::kPeerLost : StatusCode::kNetwork, what,
                     err);
}

// Drops the leading `n` bytes from an iovec array.
void Advance(iovec*& iov, size_t& count, size_t n) {
  while (count > 0 && n >= iov->iov_len) {
    n -= iov->iov_len;
    ++iov;
    --count;
  }
  if (count > 0) {
    iov->iov_base = static_cast<char*>(iov->iov_base) + n;
    iov->iov_len -= n;
  }
}

WireOp ToWire(OpType type) {
  switch (type) {
    case OpType::kPut:
      return WireOp::kPut;
    case OpType::kGet:
      return WireOp::kGet;
    case OpType::kWriteV:
      return WireOp::kWriteV;
    case OpType::kReadV:
      return WireOp::kReadV;
    case OpType::kFetchAdd:
      return WireOp::kFetchAdd;
    case OpType::kCompareSwap:
      return WireOp::kCompareSwap;
    case OpType::kPutNotify:
      return WireOp::kPutNotify;
  }
  return WireOp::kPut;
}

}  // namespace

class StreamTransport::Impl {
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

  ~Impl() {
    DeclareLost(PeerLost("the endpoint was closed"));
    reader_.join();
  }

  Request Post(std::span<const Op> ops);
  Status Flush();
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  Status MapRegion(uint64_t region_id, uint64_t key, uint64_t instance,
                   wire::MapReply* reply, UniqueFd* memfd);

 private:
  // One request on the wire, waiting for its reply.
  struct Pending {
    uint64_t id = 0;
    WireOp op = WireOp::kPut;
    std::shared_ptr<RequestState> state;
    uint64_t expected_payload = 0;   // reply bytes on success
    std::vector<iovec> destination;  // Get/ReadV: where reply bytes go
    uint64_t* result = nullptr;      // atomics
    wire::MapReply* map_reply = nullptr;
    UniqueFd* map_fd = nullptr;
  };

  // What one Post puts on the wire, built before the send lock is taken.
  // `headers` and `tables` are reserved up front (one per op) so that the
  // iovecs may point into them.
  struct Message {
    std::vector<wire::RequestHeader> headers;
    std::vector<std::vector<wire::SegmentEntry>> tables;
    std::vector<iovec> iov;
    std::vector<Pending> pending;
  };

  Status Build(const Op& op, Message* m, const std::shared_ptr<RequestState>&);
  Request Send(Message& m, const std::shared_ptr<RequestState>& state);

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

  Status SendV(iovec* iov, size_t count);
  // Receives exactly `len` bytes (the first recvmsg may carry a descriptor).
  Status RecvExact(void* data, size_t len, int* received_fd);
  Status RecvExactV(iovec* iov, size_t count);

  UniqueFd fd_;
  const std::string peer_;
  const long long timeout_ms_;
  const long long timeout_ns_;
  std::atomic<long long> last_progress_ns_;

  std::mutex send_mu_;    // serializes whole requests on the socket
  uint64_t next_id_ = 1;  // guarded by send_mu_

  mutable std::mutex mu_;
  std::condition_variable flushed_;
  std::deque<Pending> pending_;  // guarded by mu_, in wire order
  bool reader_done_ = false;     // guarded by mu_
  Status lost_reason_;           // guarded by mu_
  Status first_error_;           // guarded by mu_: since the last Flush
  int flush_sleepers_ = 0;       // guarded by mu_
  // Highest request id registered / completed (replies come in order).
  std::atomic<uint64_t> posted_id_{0};
  std::atomic<uint64_t> completed_id_{0};
  std::atomic<bool> lost_{false};

  std::thread reader_;
};

Status StreamTransport::Impl::Build(
    const Op& op, Message* m, const std::shared_ptr<RequestState>& state) {
  if (op.remote == nullptr) return InvalidArgument("operation without region");
  const RemoteRegion& r = *op.remote;
  wire::RequestHeader h;
  h.op = static_cast<uint16_t>(ToWire(op.type));
  h.region_id = r.id();
  h.key = r.key();
  h.instance = r.instance();
  Pending p;
  p.op = static_cast<WireOp>(h.op);
  p.state = state;
  switch (op.type) {
    case OpType::kPut:
    case OpType::kPutNotify:
    case OpType::kGet: {
      h.offset = op.single.remote_offset;
      h.length = op.single.length;
      if (h.length > wire::kMaxPayload) {
        return InvalidArgument("a single transfer is limited to " +
                               std::to_string(wire::kMaxPayload) + " bytes");
      }
      if (op.type == OpType::kPutNotify) {
        if (op.notify_remote == nullptr) {
          return InvalidArgument("put-with-notify without notify region");
        }
        if (op.notify_remote->instance() != r.instance()) {
          return StaleDescriptor(
              "notify region " + std::to_string(op.notify_remote->id()) +
              " and data region " + std::to_string(r.id()) + " of " + peer_ +
              " come from different instances of it");
        }
        h.operand0 = op.notify_value;
        h.operand1 = op.notify_offset;
        h.notify_region_id = op.notify_remote->id();
        h.notify_key = op.notify_remote->key();
      }
      m->headers.push_back(h);
      m->iov.push_back({&m->headers.back(), sizeof(h)});
      if (op.type == OpType::kGet) {
        p.expected_payload = h.length;
        p.destination.push_back({op.single.local, h.length});
      } else if (h.length > 0) {
        m->iov.push_back({op.single.local, h.length});
      }
      break;
    }
    case OpType::kWriteV:
    case OpType::kReadV: {
      auto segs = op.segs();
      if (segs.size() > wire::kMaxSegments) {
        return InvalidArgument(std::to_string(segs.size()) +
                               " segments exceed the limit of " +
                               std::to_string(wire::kMaxSegments));
      }
      std::vector<wire::SegmentEntry> table;
      table.reserve(segs.size());
      uint64_t total = 0;
      for (const Segment& s : segs) {
        if (s.length > wire::kMaxPayload - total) {
          return InvalidArgument("segments add up to more than " +
                                 std::to_string(wire::kMaxPayload) + " bytes");
        }
        total += s.length;
        table.push_back({s.remote_offset, s.length});
      }
      h.length = segs.size();
      m->headers.push_back(h);
      m->iov.push_back({&m->headers.back(), sizeof(h)});
      m->tables.push_back(std::move(table));
      m->iov.push_back({m->tables.back().data(),
                        m->tables.back().size() * sizeof(wire::SegmentEntry)});
      if (op.type == OpType::kWriteV) {
        for (const Segment& s : segs) {
          if (s.length > 0) m->iov.push_back({s.local, s.length});
        }
      } else {
        p.expected_payload = total;
        p.destination.reserve(segs.size());
        for (const Segment& s : segs)
          p.destination.push_back({s.local, s.length});
      }
      break;
    }
    case OpType::kFetchAdd:
    case OpType::kCompareSwap:
      h.offset = op.single.remote_offset;
      h.length = sizeof(uint64_t);
      h.operand0 = op.operand0;
      h.operand1 = op.operand1;
      p.result = op.result;
      m->headers.push_back(h);
      m->iov.push_back({&m->headers.back(), sizeof(h)});
      break;
  }
  m->pending.push_back(std::move(p));
  return Status::OK();
}

Request StreamTransport::Impl::Send(
    Message& m, const std::shared_ptr<RequestState>& state) {
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
  Message m;
  m.headers.reserve(ops.size());
  m.tables.reserve(ops.size());
  m.pending.reserve(ops.size());
  m.iov.reserve(ops.size() * 2);
  for (const Op& op : ops) {
    Status s = Build(op, &m, state);
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
  Message m;
  wire::RequestHeader h;
  h.op = static_cast<uint16_t>(WireOp::kMapRegion);
  h.region_id = region_id;
  h.key = key;
  h.instance = instance;
  m.headers.push_back(h);
  m.iov.push_back({&m.headers.back(), sizeof(h)});
  Pending p;
  p.op = WireOp::kMapRegion;
  p.state = state;
  p.expected_payload = sizeof(wire::MapReply);
  p.map_reply = reply;
  p.map_fd = memfd;
  m.pending.push_back(std::move(p));
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

Status StreamTransport::Impl::SendV(iovec* iov, size_t count) {
  while (count > 0 && iov->iov_len == 0) {
    ++iov;
    --count;
  }
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = std::min<size_t>(count, IOV_MAX);
    ssize_t n = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (Stalled()) return StallStatus();
        continue;
      }
      return SocketError("send", errno);
    }
    NoteProgress();
    Advance(iov, count, static_cast<size_t>(n));
  }
  return Status::OK();
}

Status StreamTransport::Impl::RecvExact(void* data, size_t len,
                                        int* received_fd) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    iovec iov{p, len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (received_fd != nullptr) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
    }
    ssize_t n = recvmsg(fd_.get(), &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
    if (n == 0) return PeerLost("connection closed by peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (Stalled()) return StallStatus();
        continue;
      }
      return SocketError("recv", errno);
    }
    NoteProgress();
    if (received_fd != nullptr && msg.msg_controllen > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
           c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        // Keep the last descriptor; close any others a peer sent.
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
          if (*received_fd >= 0) close(*received_fd);
          *received_fd = fd;
        }
      }
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::OK();
}

Status StreamTransport::Impl::RecvExactV(iovec* iov, size_t count) {
  while (count > 0 && iov->iov_len == 0) {
    ++iov;
    --count;
  }
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = std::min<size_t>(count, IOV_MAX);
    ssize_t n = recvmsg(fd_.get(), &msg, MSG_WAITALL);
    if (n == 0) return PeerLost("connection closed by peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (Stalled()) return StallStatus();
        continue;
      }
      return SocketError("recv", errno);
    }
    NoteProgress();
    Advance(iov, count, static_cast<size_t>(n));
  }
  return Status::OK();
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
  int fd = -1;
  Status s = RecvExact(&h, sizeof(h), &fd);
  UniqueFd received(fd);
  if (!s.ok()) return s;
  if (h.magic != wire::kReplyMagic) {
    return NetworkError("bad reply magic from " + peer_);
  }
  // Only this thread removes entries, so `p` stays valid while the lock is
  // released (deque::push_back keeps references).
  Pending* p;
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
    PS_RETURN_IF_ERROR(RecvExact(message.data(), message.size(), nullptr));
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
        PS_RETURN_IF_ERROR(
            RecvExactV(p->destination.data(), p->destination.size()));
        break;
      case WireOp::kFetchAdd:
      case WireOp::kCompareSwap:
        if (p->result != nullptr) *p->result = h.value;
        break;
      case WireOp::kMapRegion:
        PS_RETURN_IF_ERROR(
            RecvExact(p->map_reply, sizeof(wire::MapReply), nullptr));
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
  std::deque<Pending> failed;
  Status why;
  {
    std::lock_guard lock(mu_);
    reader_done_ = true;  // no request is registered after this
    why = lost_reason_;
    failed.swap(pending_);
  }
  for (Pending& p : failed) p.state->Complete(why);
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
