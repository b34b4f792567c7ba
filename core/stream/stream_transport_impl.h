// internal::StreamTransport::Impl: the state and the methods of a stream
// connection's origin side (core/stream/stream_transport.h), shared by its
// two files: stream_transport.cc (sending, flushing, reconnecting) and
// stream_replies.cc (reading replies: the reader thread and polling
// callers). Private to those files.
//
// Thread-safety: as StreamTransport's; each member says what guards it.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "core/internal/request_state.h"
#include "core/stream/kept_bytes.h"
#include "core/stream/request_encoder.h"
#include "core/stream/stream_transport.h"
#include "net/connect.h"
#include "net/socket_error.h"
#include "net/transfer.h"

namespace ps::xfer::internal {

using net::UniqueFd;

class StreamTransport::Impl : private net::TransferWatch {
 public:
  static constexpr int kSocketBufferBytes = 4 << 20;
  // How long sent bytes may go unacknowledged (with requests outstanding)
  // before the path counts as down and the connection is dialed again:
  // three of Linux's minimum retransmission timeouts.
  static constexpr uint32_t kPathStallMs = 600;
  // Free copy buffers a connection keeps for its next requests.
  static constexpr size_t kKeptPoolBytes = size_t{32} << 20;

  Impl(UniqueFd fd, std::string peer_name,
       std::chrono::milliseconds peer_timeout, Reconnect reconnect,
       std::shared_ptr<LinkCounters> counters)
      : counters_(std::move(counters)),
        fd_(std::move(fd)),
        peer_(std::move(peer_name)),
        timeout_ms_(peer_timeout.count()),
        timeout_ns_(static_cast<long long>(peer_timeout.count()) * 1'000'000),
        reconnect_(std::move(reconnect)),
        last_progress_ns_(MonotonicNanos()) {
    ConfigureSocket(fd_.get());
    reader_ = std::thread([this] { ReadReplies(); });
  }

  ~Impl() override {
    {
      std::lock_guard lock(mu_);
      closing_ = true;  // a close, not a loss: not counted
    }
    DeclareLost(PeerLost("the endpoint was closed"));
    reader_.join();
  }

  // `reader_needed` false: the caller polls for the replies itself (Run).
  Request Post(std::span<const Op> ops, bool reader_needed = true);
  Status Run(const Op& op);
  Status Flush();
  // Waits for the replies of every request posted before (of every read,
  // get, readv or atomic, with `reads_only`); kPeerLost once lost, else OK
  // (errors stay for Flush).
  Status Drain(bool reads_only);
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  const std::atomic<bool>& lost_flag() const { return lost_; }
  Status MapRegion(uint64_t region_id, uint64_t key, uint64_t instance,
                   wire::MapReply* reply, UniqueFd* memfd);

 private:
  Request Send(OutgoingMessage& m, const std::shared_ptr<RequestState>& state,
               bool reader_needed);
  // Waits, holding `lock` on mu_ on return, until completed_id_ reaches
  // `target`.
  void WaitThrough(std::unique_lock<std::mutex>& lock, uint64_t target);

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
  // Reads one reply. `block` false: returns at once with *got false when
  // no byte of one has arrived (a reply begun is read to its end).
  Status ReadOneReply(bool block, bool* got);
  // A polling caller's turn: reads the replies that arrived, if no other
  // thread holds the read lock. A failed read is left to the reader thread.
  void PollReplies();
  // A polling caller is done; wakes the reader thread if replies are due.
  void StopPolling();
  // True while the reader thread should keep off the socket: callers poll
  // it, or did so a moment ago and no reply is due.
  bool ShouldPark() const;
  void ParkWhilePolled();
  void WakeReader() {
    std::lock_guard lock(park_mu_);
    park_cv_.notify_one();
  }
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

  // Reconnects and the loss of the peer are counted there (may be null).
  const std::shared_ptr<LinkCounters> counters_;
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
  bool closing_ = false;              // guarded by mu_: the destructor runs
  Status lost_reason_;                // guarded by mu_
  Status first_error_;                // guarded by mu_: since the last Flush
  int flush_sleepers_ = 0;            // guarded by mu_
  // Highest request id registered / completed (replies come in order).
  std::atomic<uint64_t> posted_id_{0};
  std::atomic<uint64_t> completed_id_{0};
  // Highest request id whose reply carries data (ReadFence waits for it).
  std::atomic<uint64_t> last_read_id_{0};
  std::atomic<bool> lost_{false};

  // Reading replies (see the header): the read lock, the failure a polling
  // caller's read left to the reader thread, and the reader's parking.
  std::mutex read_mu_;
  Status read_failure_;  // guarded by read_mu_
  std::atomic<bool> read_failed_{false};
  std::atomic<int> pollers_{0};
  std::atomic<long long> last_poll_ns_{0};
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<bool> parked_{false};

  std::thread reader_;
};

}  // namespace ps::xfer::internal
