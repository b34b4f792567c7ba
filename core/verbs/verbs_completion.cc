// The completion half of VerbsTransport::Impl (verbs_transport_impl.h): the
// progress thread, what a refused or flushed work request becomes, queue
// pair recovery, losing the peer, and Flush.
#include <glog/logging.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/internal/hello.h"
#include "core/verbs/verbs_transport_impl.h"

namespace ps::xfer::internal {
namespace {

bool PeerSideError(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
      return true;
    default:
      return false;
  }
}

}  // namespace

void VerbsTransport::Impl::Progress() {
  ibv_wc wc[32];
  long long busy_since = MonotonicNanos();
  long long last_progress = busy_since;
  bool armed = false;
  for (;;) {
    int n = ibv_poll_cq(qp_->cq(), 32, wc);
    if (n < 0) {
      DeclareLost(NetworkError("ibv_poll_cq failed for " + peer_));
      n = 0;
    }
    const long long now = MonotonicNanos();
    if (n > 0) {
      for (int i = 0; i < n; ++i) Handle(wc[i]);
      busy_since = last_progress = now;
      armed = false;
      continue;
    }
    bool idle, broken;
    long long lost_at;
    {
      std::lock_guard lock(mu_);
      idle = inflight_.empty();
      broken = broken_;
      lost_at = lost_.load() ? lost_at_ns_ : 0;
    }
    if (idle && broken && !lost()) {
      Recover();
      armed = false;
      continue;
    }
    if (stop_.load() && idle) break;
    if (lost_at != 0 && !idle && now - lost_at > 2'000'000'000) {
      // The device never flushed the dead queue pair: give up on it.
      std::deque<WorkRequest*> rest;
      {
        std::lock_guard lock(mu_);
        rest.swap(inflight_);
      }
      for (WorkRequest* r : rest) Finish(r, LostStatus());
      continue;
    }
    if (idle) {
      last_progress = now;
    } else if (now - busy_since < kSpinNanos) {
      CpuRelax();
      continue;
    }
    if (!idle && !lost() && now - last_progress > timeout_ns_) {
      DeclareLost(PeerLost("no completion from " + peer_ + " for " +
                           std::to_string(timeout_ms_) + " ms"));
      continue;
    }
    if (!armed) {
      ibv_req_notify_cq(qp_->cq(), 0);
      armed = true;
      continue;  // poll once more: a completion may have come before arming
    }
    // Once lost, the closed socket would wake every poll: leave it out.
    pollfd fds[3] = {{qp_->channel()->fd, POLLIN, 0},
                     {wake_.get(), POLLIN, 0},
                     {fd_.get(), POLLIN, 0}};
    const int tick_ms =
        static_cast<int>(std::clamp<long long>(timeout_ms_ / 4, 1, 100));
    int rc = poll(fds, lost() ? 2 : 3, tick_ms);
    if (rc <= 0) continue;
    if (fds[0].revents & POLLIN) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      if (ibv_get_cq_event(qp_->channel(), &cq, &context) == 0) {
        ibv_ack_cq_events(cq, 1);
        armed = false;
      }
    }
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      // Bytes are a reply when a control request was in flight at any time
      // around the look (control_seq_ odd, or moved on).
      const uint64_t before = control_seq_.load();
      char byte;
      ssize_t got = recv(fd_.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
      const bool quiet = before % 2 == 0 && control_seq_.load() == before;
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        DeclareLost(PeerLost(peer_ + " closed the connection"));
      } else if (got > 0 && quiet) {
        DeclareLost(NetworkError(peer_ + " sent unexpected control data"));
      }
    }
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      (void)!read(wake_.get(), &v, sizeof(v));
    }
    busy_since = MonotonicNanos();
  }
}

void VerbsTransport::Impl::Handle(const ibv_wc& wc) {
  auto* r = reinterpret_cast<WorkRequest*>(wc.wr_id);
  {
    std::lock_guard lock(mu_);
    if (!inflight_.empty() && inflight_.front() == r) {
      inflight_.pop_front();
    } else {
      auto it = std::find(inflight_.begin(), inflight_.end(), r);
      if (it != inflight_.end()) inflight_.erase(it);
    }
  }
  if (wc.status == IBV_WC_SUCCESS) {
    if (r->notify_store) {
      uint64_t found;
      std::memcpy(&found, reinterpret_cast<void*>(r->sge.addr), 8);
      if (found != r->wr.wr.atomic.compare_add) {
        RetryNotifyStore(r, found);
        return;
      }
    }
    if (r->copy_out != nullptr) {
      std::memcpy(r->copy_out, reinterpret_cast<void*>(r->sge.addr), r->bytes);
    }
    if (r->result != nullptr) {
      std::memcpy(r->result, reinterpret_cast<void*>(r->sge.addr), 8);
    }
    Finish(r, Status::OK());
    return;
  }
  if (lost()) {
    Finish(r, LostStatus());
    return;
  }
  if (wc.status == IBV_WC_WR_FLUSH_ERR) {
    // Never ran: flushed because an earlier request broke the queue pair.
    if (r->op->failed.load()) {
      Finish(r, r->op->Failure());
    } else {
      std::lock_guard lock(mu_);
      broken_ = true;
      replay_.push_back(r);
    }
    return;
  }
  if (PeerSideError(wc.status)) {
    {
      std::lock_guard lock(mu_);
      broken_ = true;
    }
    Finish(r, Diagnose(*r, wc.status));
    return;
  }
  DeclareLost(PeerLost(std::string("RDMA connection to ") + peer_ +
                       " failed: " + ibv_wc_status_str(wc.status)));
  Finish(r, LostStatus());
}

uint64_t VerbsTransport::Impl::SwapNotifyGuess(uint64_t address,
                                               uint64_t value) {
  std::lock_guard lock(guess_mu_);
  if (notify_guess_.size() >= kNotifyGuesses) notify_guess_.clear();
  return std::exchange(notify_guess_[address], value);
}

void VerbsTransport::Impl::RetryNotifyStore(WorkRequest* r, uint64_t found) {
  // Someone else stored there (or this endpoint never had): swap against
  // what is there now. The request stays outstanding, so Flush waits for it.
  r->wr.wr.atomic.compare_add = found;
  Status refusal;
  {
    std::lock_guard lock(mu_);
    if (lost_.load()) {
      refusal = lost_status_;
    } else if (broken_) {
      replay_.push_back(r);
      return;
    } else if (PostLocked({r}, &refusal) == 1) {
      return;
    }
  }
  Finish(r, refusal);
}

void VerbsTransport::Impl::Finish(WorkRequest* r, const Status& s) {
  // The request completes before it counts as done: a Flush that returns
  // promises every request posted before it tests complete.
  r->op->Finish(s);
  {
    std::lock_guard lock(mu_);
    if (r->slot >= 0) free_slots_.push_back(r->slot);
    if (r->word >= 0) free_words_.push_back(r->word);
    --outstanding_;
    ++completed_seq_;
    if (!s.ok() && first_error_.ok()) first_error_ = s;
  }
  space_cv_.notify_all();
  flush_cv_.notify_all();
  delete r;
}

StatusOr<proto::VerbsControlReply> VerbsTransport::Impl::Control(
    const proto::VerbsControl& req, bool bounded) {
  std::lock_guard lock(control_mu_);
  // From here: waiting for other threads' requests is not the peer's delay.
  const net::Deadline deadline =
      bounded ? std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(timeout_ms_)
              : net::Deadline::max();
  control_seq_.fetch_add(1);  // odd: a request in flight
  proto::VerbsControlReply reply;
  Status s = SendMessage(fd_.get(), req, deadline);
  if (s.ok()) s = RecvMessage(fd_.get(), &reply, deadline);
  control_seq_.fetch_add(1);
  if (!s.ok()) {
    DeclareLost(
        PeerLost("control request to " + peer_ + " failed: " + s.ToString()));
    return LostStatus();
  }
  return reply;
}

Status VerbsTransport::Impl::ReplyStatus(
    const proto::VerbsControlReply& reply) const {
  const int code = reply.code();
  if (code < 0 || code > static_cast<int>(kLastStatusCode)) {
    return Internal("bad status code from " + peer_);
  }
  return Status(static_cast<StatusCode>(code), reply.message());
}

Status VerbsTransport::Impl::Diagnose(const WorkRequest& r,
                                      ibv_wc_status status) {
  const std::string refused = std::string("the RDMA device refused (") +
                              ibv_wc_status_str(status) + ")";
  if (r.staging) {
    // The buffer the target offered for this connection: nothing the
    // region table could explain.
    return Internal("the staging buffer of " + peer_ + ": " + refused);
  }
  if (status != IBV_WC_REM_ACCESS_ERR && status != IBV_WC_REM_INV_REQ_ERR &&
      status != IBV_WC_REM_OP_ERR) {
    return Internal("a local buffer of an operation to " + peer_ + ": " +
                    refused);
  }
  proto::VerbsControl req;
  req.set_op(proto::VerbsControl::DIAGNOSE);
  req.set_region_id(r.region_id);
  req.set_key(r.key);
  req.set_instance(r.instance);
  req.set_offset(r.offset);
  req.set_length(r.length);
  req.set_access(r.access);
  PS_ASSIGN_OR_RETURN(proto::VerbsControlReply reply, Control(req));
  if (reply.code() == 0) {
    return AccessDenied("region " + std::to_string(r.region_id) + " on " +
                        peer_ + ": " + refused +
                        ", though the region allows the access");
  }
  return ReplyStatus(reply);
}

void VerbsTransport::Impl::Recover() {
  auto fresh = QueuePair::Create(device_, OriginQueuePairOptions());
  if (!fresh.ok()) {
    DeclareLost(fresh.status().WithContext("new queue pair to " + peer_));
    return;
  }
  proto::VerbsControl req;
  req.set_op(proto::VerbsControl::RECONNECT);
  *req.mutable_qp() = (*fresh)->Info();
  auto reply = Control(req);
  if (!reply.ok()) return;  // declared lost
  Status s = reply->code() == 0
                 ? (*fresh)->Connect(reply->qp())
                 : Status(StatusCode::kNetwork, reply->message());
  if (!s.ok()) {
    DeclareLost(PeerLost("cannot reconnect to " + peer_ + ": " + s.ToString()));
    return;
  }
  std::unique_ptr<QueuePair> old;
  std::vector<WorkRequest*> dropped;
  Status refusal;
  std::vector<WorkRequest*> again;
  {
    std::lock_guard lock(mu_);
    old = std::exchange(qp_, std::move(fresh).value());
    broken_ = false;
    for (WorkRequest* r : replay_) {
      (r->op->failed.load() ? dropped : again).push_back(r);
    }
    replay_.clear();
    for (size_t i = 0; i < again.size(); i += kPostChunk) {
      std::vector<WorkRequest*> chunk(
          again.begin() + static_cast<ptrdiff_t>(i),
          again.begin() +
              static_cast<ptrdiff_t>(std::min(again.size(), i + kPostChunk)));
      const size_t posted = PostLocked(chunk, &refusal);
      if (posted < chunk.size()) {
        dropped.insert(dropped.end(),
                       again.begin() + static_cast<ptrdiff_t>(i + posted),
                       again.end());
        break;
      }
    }
  }
  for (WorkRequest* r : dropped) {
    Finish(r, refusal.ok() ? r->op->Failure() : refusal);
  }
  VLOG(1) << "verbs queue pair to " << peer_ << " reconnected";
}

void VerbsTransport::Impl::DeclareLost(const Status& why) {
  std::deque<WorkRequest*> waiting;
  {
    std::lock_guard lock(mu_);
    if (lost_.load()) return;
    lost_status_ =
        why.Is(StatusCode::kPeerLost) ? why : PeerLost(why.ToString());
    lost_at_ns_ = MonotonicNanos();
    lost_.store(true, std::memory_order_release);
    qp_->MoveToError();  // the NIC flushes whatever it still holds
    waiting.swap(replay_);
  }
  if (!stop_.load()) VLOG(1) << "verbs: " << lost_status_.ToString();
  space_cv_.notify_all();
  flush_cv_.notify_all();
  for (WorkRequest* r : waiting) Finish(r, LostStatus());
}

Status VerbsTransport::Impl::Flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = posted_seq_;
  flush_cv_.wait(lock, [&] { return completed_seq_ >= target; });
  if (lost_.load() && first_error_.ok()) return lost_status_;
  return std::exchange(first_error_, Status::OK());
}

}  // namespace ps::xfer::internal
