#include "core/stream/stream_transport.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "core/stream/stream_transport_impl.h"

namespace ps::xfer::internal {
namespace {

// Sets the id and acknowledgement of a request kept as bytes (its header
// first) for sending again.
void PatchKeptHeader(KeptBytes& kept, uint64_t id, uint64_t acked) {
  std::memcpy(kept.data() + offsetof(wire::RequestHeader, request_id), &id,
              sizeof(id));
  std::memcpy(kept.data() + offsetof(wire::RequestHeader, acked_through),
              &acked, sizeof(acked));
}

// The reconnect loop's pace (Resume): a try that was refused at once
// pauses before the next, from the first pause doubling up to the longest;
// a try waits at least kShortestRedialTry (a few round trips) for the
// listener otherwise. MaxRedialTries counts on kShortestRedialTry being no
// shorter than kLongestRedialPause.
constexpr std::chrono::milliseconds kFirstRedialPause{10};
constexpr std::chrono::milliseconds kLongestRedialPause{200};
constexpr std::chrono::milliseconds kShortestRedialTry{250};
static_assert(kShortestRedialTry >= kLongestRedialPause);

}  // namespace

uint64_t MaxRedialTries(std::chrono::milliseconds peer_timeout) {
  // The k-th try that paused paused at least the k-th pause of the
  // sequence, and one that did not took at least the longest pause: n tries
  // take at least the sum of the sequence's first n - 1 pauses.
  uint64_t tries = 1;
  std::chrono::milliseconds spent{0};
  std::chrono::milliseconds pause = kFirstRedialPause;
  while (spent < peer_timeout && pause < kLongestRedialPause) {
    spent += pause;
    ++tries;
    pause = std::min(pause * 2, kLongestRedialPause);
  }
  if (spent < peer_timeout) {
    tries += static_cast<uint64_t>(
        (peer_timeout - spent + pause - std::chrono::milliseconds(1)) / pause);
  }
  return tries;
}

Request StreamTransport::Impl::Send(OutgoingMessage& m,
                                    const std::shared_ptr<RequestState>& state,
                                    bool reader_needed) {
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
      if (wire::ReturnsData(m.headers[i].op)) {
        last_read_id_.store(p.id, std::memory_order_release);
      }
      pending_.push_back(std::move(p));
    }
    // Before publishing the new ids, so the reader's stall check measures
    // from now rather than from an idle period.
    NoteProgress();
    // Sequentially consistent, as is the load of parked_ below and the
    // parked reader's loads: either it sees the request or we see it parked.
    posted_id_.store(next_id_ - 1, std::memory_order_seq_cst);
  }
  if (reader_needed && parked_.load(std::memory_order_seq_cst)) WakeReader();
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

Request StreamTransport::Impl::Post(std::span<const Op> ops,
                                    bool reader_needed) {
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
  return Send(m, state, reader_needed);
}

Status StreamTransport::Impl::MapRegion(uint64_t region_id, uint64_t key,
                                        uint64_t instance,
                                        wire::MapReply* reply,
                                        UniqueFd* memfd) {
  if (lost()) return LostStatus();
  auto state = std::make_shared<RequestState>();
  OutgoingMessage m;
  EncodeMapRegion(region_id, key, instance, reply, memfd, state, &m);
  return Send(m, state, true).Wait();
}

void StreamTransport::Impl::WaitThrough(std::unique_lock<std::mutex>& lock,
                                        uint64_t target) {
  auto caught_up = [&] {
    return completed_id_.load(std::memory_order_acquire) >= target;
  };
  if (caught_up()) return;
  lock.unlock();
  bool done = SpinBriefly(caught_up);
  lock.lock();
  if (!done) {
    ++flush_sleepers_;
    flushed_.wait(lock, caught_up);
    --flush_sleepers_;
  }
}

Status StreamTransport::Impl::Flush() {
  const uint64_t target = posted_id_.load(std::memory_order_acquire);
  std::unique_lock lock(mu_);
  WaitThrough(lock, target);
  Status first = std::exchange(first_error_, Status::OK());
  if (first.ok() && lost_.load(std::memory_order_relaxed)) first = lost_reason_;
  return first;
}

Status StreamTransport::Impl::Drain(bool reads_only) {
  const uint64_t target =
      (reads_only ? last_read_id_ : posted_id_).load(std::memory_order_acquire);
  std::unique_lock lock(mu_);
  WaitThrough(lock, target);
  return lost_.load(std::memory_order_relaxed) ? lost_reason_ : Status::OK();
}

Status StreamTransport::Impl::LostStatus() {
  std::lock_guard lock(mu_);
  return lost_reason_;
}

void StreamTransport::Impl::DeclareLost(const Status& why) {
  std::lock_guard lock(mu_);  // also against Resume replacing fd_
  if (!lost_.load(std::memory_order_relaxed)) {
    lost_reason_ = PeerLost("peer " + peer_ + " lost: " + why.message());
    lost_.store(true, std::memory_order_seq_cst);
    if (counters_ != nullptr && !closing_) {
      counters_->peers_lost.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Wakes the reader (and any sender) blocked on the socket, or parked.
  shutdown(fd_.get(), SHUT_RDWR);
  WakeReader();
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
  auto sleep = kFirstRedialPause;
  const std::chrono::microseconds attempt =
      std::clamp<std::chrono::microseconds>(
          std::chrono::microseconds(8 *
                                    uint64_t{net::TcpPathOf(fd_.get()).rtt_us}),
          kShortestRedialTry, std::chrono::seconds(1));
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
        sleep = std::min(sleep * 2, kLongestRedialPause);
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
    if (counters_ != nullptr) {
      counters_->reconnects.fetch_add(1, std::memory_order_relaxed);
    }
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

StreamTransport::StreamTransport(UniqueFd fd, std::string peer_name,
                                 std::chrono::milliseconds peer_timeout,
                                 Reconnect reconnect,
                                 std::shared_ptr<LinkCounters> counters)
    : impl_(std::make_unique<Impl>(std::move(fd), std::move(peer_name),
                                   peer_timeout, std::move(reconnect),
                                   std::move(counters))),
      lost_(&impl_->lost_flag()) {}

StreamTransport::~StreamTransport() = default;

Request StreamTransport::Post(const Op& op) {
  return impl_->Post(std::span<const Op>(&op, 1));
}

Request StreamTransport::PostBatch(std::span<const Op> ops) {
  return impl_->Post(ops);
}

Status StreamTransport::Run(const Op& op) { return impl_->Run(op); }

Status StreamTransport::Flush() { return impl_->Flush(); }

Status StreamTransport::WriteFence() {
  // The target executes a connection's requests in the order they were
  // sent, and a resumed session sends the unanswered ones again in that
  // order before any new one: writes are ordered without waiting.
  return lost() ? impl_->Drain(false) : Status::OK();
}

Status StreamTransport::ReadFence() { return impl_->Drain(true); }

Status StreamTransport::Drain() { return impl_->Drain(false); }

Status StreamTransport::MapRegion(uint64_t region_id, uint64_t key,
                                  uint64_t instance, wire::MapReply* reply,
                                  UniqueFd* memfd) {
  return impl_->MapRegion(region_id, key, instance, reply, memfd);
}

}  // namespace ps::xfer::internal
