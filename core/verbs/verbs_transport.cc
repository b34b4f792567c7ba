#include "core/verbs/verbs_transport.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/access.h"
#include "core/hello.h"
#include "core/request_state.h"
#include "core/shm/remote_mapping.h"

namespace ps::xfer::internal {
namespace {

// Bounce slots for local buffers outside registered regions, and words for
// atomic results: registered once per endpoint (2 MiB + 8 KiB).
constexpr size_t kSlotBytes = 64 << 10;
constexpr int kSlots = 32;
constexpr int kWords = 1024;
// Writes up to this size travel inline in the work request.
constexpr size_t kInlineBytes = 128;
// Work requests handed to the NIC per ibv_post_send call at most.
constexpr size_t kPostChunk = 64;
// How long the progress thread polls the CQ before it sleeps on the
// completion channel while work is outstanding.
constexpr long long kSpinNanos = 20'000;
// Notify words whose last stored value this endpoint remembers (the guess of
// a notify store's compare-and-swap); forgotten all at once beyond this.
constexpr size_t kNotifyGuesses = 1 << 16;

// One Post call: its request and whether it already failed (work requests
// of a failed operation that were flushed are not posted again: a
// PutWithNotify whose data write failed must not write its flag).
struct OpState {
  explicit OpState(int pending)
      : state(std::make_shared<RequestState>(pending)) {}
  void Finish(const Status& s) {
    if (!s.ok()) {
      std::lock_guard lock(mu);
      if (!failed.load()) {
        failure = s;
        failed.store(true);
      }
    }
    state->Complete(s);
  }
  Status Failure() {
    std::lock_guard lock(mu);
    return failure;
  }
  std::shared_ptr<RequestState> state;
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status failure;
};

// One work request, from planning to its completion.
struct WorkRequest {
  std::shared_ptr<OpState> op;
  ibv_send_wr wr{};
  ibv_sge sge{};
  bool needs_slot = false;
  bool needs_word = false;
  int slot = -1;
  int word = -1;
  const void* copy_in = nullptr;  // Put through a slot: source
  void* copy_out = nullptr;       // Get through a slot: destination
  size_t bytes = 0;
  uint64_t* result = nullptr;  // atomics
  // A PutWithNotify's flag: a compare-and-swap that is posted again with
  // the value it found until it finds the one it expected.
  bool notify_store = false;
  // What the request touches at the target, to ask why it was refused.
  uint64_t region_id = 0, key = 0, instance = 0, offset = 0, length = 0;
  uint32_t access = 0;
  uint8_t inline_data[kInlineBytes];
};

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

QueuePairOptions OriginQueuePairOptions() {
  QueuePairOptions o;
  o.send_depth = 1024;
  o.max_sge = 1;
  o.max_inline = static_cast<int>(kInlineBytes);
  o.completion_channel = true;
  return o;
}

class VerbsTransport::Impl {
 public:
  Impl(std::shared_ptr<VerbsDevice> device, std::unique_ptr<QueuePair> qp,
       net::UniqueFd fd, std::string peer_name,
       std::chrono::milliseconds peer_timeout)
      : device_(std::move(device)),
        qp_(std::move(qp)),
        fd_(std::move(fd)),
        peer_(std::move(peer_name)),
        timeout_ns_(static_cast<long long>(peer_timeout.count()) * 1'000'000),
        timeout_ms_(peer_timeout.count()) {}
  ~Impl();

  Status Start(const proto::QueuePairInfo& peer_qp);
  Request PostOps(std::span<const Op> ops);
  Status Flush();
  bool lost() const { return lost_.load(std::memory_order_acquire); }

 private:
  Status Plan(const Op& op, std::vector<std::unique_ptr<WorkRequest>>* plan);
  // Remembers `value` as the last one stored at the notify word at
  // `address`; returns the one remembered before (0 if none).
  uint64_t SwapNotifyGuess(uint64_t address, uint64_t value);
  // Posts a notify store again after its compare-and-swap found `found`.
  void RetryNotifyStore(WorkRequest* r, uint64_t found);
  // Gives `r` its slot or word (posting `pending` first if it must wait);
  // false once the peer is lost.
  bool Acquire(WorkRequest* r, std::vector<WorkRequest*>& pending);
  void Submit(std::vector<WorkRequest*>& pending);
  // Posts `chain` on the queue pair (mu_ held) and tracks what went out;
  // returns how many did (all, unless the NIC refused part: then *why says
  // why).
  size_t PostLocked(const std::vector<WorkRequest*>& chain, Status* why);

  void Progress();
  void Handle(const ibv_wc& wc);
  // Completes `r` with `s` and frees it.
  void Finish(WorkRequest* r, const Status& s);
  Status Diagnose(const WorkRequest& r, ibv_wc_status status);
  void Recover();
  void DeclareLost(const Status& why);
  StatusOr<proto::VerbsControlReply> Control(const proto::VerbsControl& req);
  Status LostStatus() {
    std::lock_guard lock(mu_);
    return lost_status_;
  }

  const std::shared_ptr<VerbsDevice> device_;
  std::unique_ptr<QueuePair> qp_;  // replaced by Recover under mu_
  net::UniqueFd fd_;
  net::UniqueFd wake_;
  const std::string peer_;
  const long long timeout_ns_;
  const long long timeout_ms_;

  // Bounce slots and atomic words.
  void* pool_ = nullptr;
  std::unique_ptr<VerbsRegistration> pool_mr_;
  int inline_max_ = 0;

  std::mutex mu_;
  std::condition_variable space_cv_;  // slots, words, send queue room
  std::condition_variable flush_cv_;
  std::vector<int> free_slots_;        // guarded by mu_
  std::vector<int> free_words_;        // guarded by mu_
  std::deque<WorkRequest*> inflight_;  // guarded by mu_, posting order
  std::deque<WorkRequest*> replay_;    // guarded by mu_
  size_t outstanding_ = 0;             // inflight_ + replay_
  uint64_t posted_seq_ = 0;            // guarded by mu_
  uint64_t completed_seq_ = 0;         // guarded by mu_
  Status first_error_;                 // guarded by mu_, since Flush
  bool broken_ = false;                // guarded by mu_: QP in error
  Status lost_status_;                 // guarded by mu_
  long long lost_at_ns_ = 0;           // guarded by mu_
  std::atomic<bool> lost_{false};
  std::atomic<bool> stop_{false};

  std::mutex guess_mu_;
  std::unordered_map<uint64_t, uint64_t> notify_guess_;  // by guess_mu_
  std::thread progress_;
};

Status VerbsTransport::Impl::Start(const proto::QueuePairInfo& peer_qp) {
  PS_RETURN_IF_ERROR(qp_->Connect(peer_qp));
  inline_max_ =
      std::min<int>(qp_->max_inline(), static_cast<int>(kInlineBytes));
  const size_t bytes = kSlots * kSlotBytes + kWords * sizeof(uint64_t);
  pool_ = std::aligned_alloc(4096, bytes);
  if (pool_ == nullptr) return ResourceExhausted("verbs bounce slots");
  PS_ASSIGN_OR_RETURN(pool_mr_, device_->Register(pool_, bytes, 0, false));
  for (int i = kSlots - 1; i >= 0; --i) free_slots_.push_back(i);
  for (int i = kWords - 1; i >= 0; --i) free_words_.push_back(i);
  wake_ = net::UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_.valid())
    return ErrnoStatus(StatusCode::kIOError, "eventfd", errno);
  // Control replies come within the peer timeout, or the peer is lost.
  timeval tv{static_cast<time_t>(timeout_ms_ / 1000),
             static_cast<suseconds_t>(timeout_ms_ % 1000 * 1000)};
  setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  progress_ = std::thread([this] { Progress(); });
  return Status::OK();
}

VerbsTransport::Impl::~Impl() {
  if (progress_.joinable()) {
    stop_.store(true);
    DeclareLost(PeerLost("the endpoint to " + peer_ + " was closed"));
    uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));
    progress_.join();
  }
  qp_.reset();
  pool_mr_.reset();
  std::free(pool_);
}

Status VerbsTransport::Impl::Plan(
    const Op& op, std::vector<std::unique_ptr<WorkRequest>>* plan) {
  auto target = [&](const RemoteRegion& region) -> StatusOr<uint64_t> {
    uint64_t base = RemoteRegionAccess::VerbsAddress(region);
    if (base == 0) {
      return NotSupported("region " + std::to_string(region.id()) + " on " +
                          peer_ + " is not registered with an RDMA device");
    }
    return base;
  };
  auto make = [&](const RemoteRegion& region, uint64_t base, uint64_t offset,
                  size_t length, uint32_t access, ibv_wr_opcode opcode) {
    auto r = std::make_unique<WorkRequest>();
    r->wr.wr_id = reinterpret_cast<uintptr_t>(r.get());
    r->wr.opcode = opcode;
    r->wr.send_flags = IBV_SEND_SIGNALED;
    r->wr.sg_list = &r->sge;
    r->wr.num_sge = 1;
    r->wr.wr.rdma.remote_addr = base + offset;
    r->wr.wr.rdma.rkey = static_cast<uint32_t>(region.key());
    r->region_id = region.id();
    r->key = region.key();
    r->instance = region.instance();
    r->offset = offset;
    r->length = length;
    r->access = access;
    return r;
  };
  auto write = [&](const RemoteRegion& region, uint64_t base, const void* src,
                   uint64_t offset, size_t length) {
    if (length == 0) return;
    const auto* bytes = static_cast<const uint8_t*>(src);
    uint32_t lkey = 0;
    if (length <= static_cast<size_t>(inline_max_)) {
      auto r =
          make(region, base, offset, length, kRemoteWrite, IBV_WR_RDMA_WRITE);
      std::memcpy(r->inline_data, src, length);
      r->sge = {reinterpret_cast<uintptr_t>(r->inline_data),
                static_cast<uint32_t>(length), 0};
      r->wr.send_flags |= IBV_SEND_INLINE;
      plan->push_back(std::move(r));
    } else if (device_->FindLocal(src, length, &lkey)) {
      auto r =
          make(region, base, offset, length, kRemoteWrite, IBV_WR_RDMA_WRITE);
      r->sge = {reinterpret_cast<uintptr_t>(src), static_cast<uint32_t>(length),
                lkey};
      plan->push_back(std::move(r));
    } else {
      for (size_t pos = 0; pos < length; pos += kSlotBytes) {
        size_t n = std::min(kSlotBytes, length - pos);
        auto r = make(region, base, offset + pos, n, kRemoteWrite,
                      IBV_WR_RDMA_WRITE);
        r->needs_slot = true;
        r->copy_in = bytes + pos;
        r->bytes = n;
        plan->push_back(std::move(r));
      }
    }
  };
  auto read = [&](const RemoteRegion& region, uint64_t base, void* dst,
                  uint64_t offset, size_t length) {
    if (length == 0) return;
    auto* bytes = static_cast<uint8_t*>(dst);
    uint32_t lkey = 0;
    if (device_->FindLocal(dst, length, &lkey)) {
      auto r =
          make(region, base, offset, length, kRemoteRead, IBV_WR_RDMA_READ);
      r->sge = {reinterpret_cast<uintptr_t>(dst), static_cast<uint32_t>(length),
                lkey};
      plan->push_back(std::move(r));
      return;
    }
    for (size_t pos = 0; pos < length; pos += kSlotBytes) {
      size_t n = std::min(kSlotBytes, length - pos);
      auto r =
          make(region, base, offset + pos, n, kRemoteRead, IBV_WR_RDMA_READ);
      r->needs_slot = true;
      r->copy_out = bytes + pos;
      r->bytes = n;
      plan->push_back(std::move(r));
    }
  };

  PS_ASSIGN_OR_RETURN(uint64_t base, target(*op.remote));
  const RemoteRegion& region = *op.remote;
  switch (op.type) {
    case OpType::kPut:
    case OpType::kWriteV:
      for (const Segment& s : op.segs()) {
        if (s.length > (uint64_t{1} << 31)) {
          return InvalidArgument("a verbs transfer is limited to 2 GiB");
        }
        write(region, base, s.local, s.remote_offset, s.length);
      }
      return Status::OK();
    case OpType::kGet:
    case OpType::kReadV:
      for (const Segment& s : op.segs()) {
        if (s.length > (uint64_t{1} << 31)) {
          return InvalidArgument("a verbs transfer is limited to 2 GiB");
        }
        read(region, base, s.local, s.remote_offset, s.length);
      }
      return Status::OK();
    case OpType::kFetchAdd:
    case OpType::kCompareSwap: {
      const bool add = op.type == OpType::kFetchAdd;
      auto r =
          make(region, base, op.single.remote_offset, 8, kRemoteAtomic,
               add ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP);
      r->wr.wr.atomic.remote_addr = base + op.single.remote_offset;
      r->wr.wr.atomic.rkey = static_cast<uint32_t>(region.key());
      r->wr.wr.atomic.compare_add = op.operand0;
      r->wr.wr.atomic.swap = add ? 0 : op.operand1;
      r->needs_word = true;
      r->result = op.result;
      plan->push_back(std::move(r));
      return Status::OK();
    }
    case OpType::kPutNotify: {
      PS_ASSIGN_OR_RETURN(uint64_t flag_base, target(*op.notify_remote));
      write(region, base, op.single.local, op.single.remote_offset,
            op.single.length);
      // The flag is stored with a compare-and-swap, not an RDMA WRITE: a
      // WRITE may be placed a byte at a time (soft-RoCE copies with memcpy),
      // and a reader polling the word would see a torn value. It expects
      // the value this endpoint last stored there; Handle retries with the
      // value found if that guess was wrong.
      const uint64_t flag_address = flag_base + op.notify_offset;
      auto r = make(*op.notify_remote, flag_base, op.notify_offset, 8,
                    kRemoteWrite, IBV_WR_ATOMIC_CMP_AND_SWP);
      r->wr.wr.atomic.remote_addr = flag_address;
      r->wr.wr.atomic.rkey = static_cast<uint32_t>(op.notify_remote->key());
      r->wr.wr.atomic.compare_add =
          SwapNotifyGuess(flag_address, op.notify_value);
      r->wr.wr.atomic.swap = op.notify_value;
      r->needs_word = true;
      r->notify_store = true;
      plan->push_back(std::move(r));
      return Status::OK();
    }
  }
  return Internal("unknown operation");
}

Request VerbsTransport::Impl::PostOps(std::span<const Op> ops) {
  if (lost()) return Request(LostStatus());
  std::vector<std::unique_ptr<WorkRequest>> plan;
  for (const Op& op : ops) {
    Status s = Plan(op, &plan);
    if (!s.ok()) return Request(std::move(s));
  }
  if (plan.empty()) return Request();
  auto op = std::make_shared<OpState>(static_cast<int>(plan.size()));
  Request request(op->state);
  std::vector<WorkRequest*> pending;
  for (size_t i = 0; i < plan.size(); ++i) {
    WorkRequest* r = plan[i].release();
    r->op = op;
    if (!Acquire(r, pending)) {
      // Lost: this and every later request of the plan fail here.
      Status lost_status = LostStatus();
      delete r;
      op->Finish(lost_status);
      for (size_t j = i + 1; j < plan.size(); ++j) op->Finish(lost_status);
      break;
    }
    pending.push_back(r);
    if (pending.size() >= kPostChunk) Submit(pending);
  }
  Submit(pending);
  return request;
}

bool VerbsTransport::Impl::Acquire(WorkRequest* r,
                                   std::vector<WorkRequest*>& pending) {
  if (!r->needs_slot && !r->needs_word) return true;
  std::vector<int>& free_list = r->needs_slot ? free_slots_ : free_words_;
  std::unique_lock lock(mu_);
  if (free_list.empty() && !lost_.load()) {
    // What this thread holds must reach the NIC before it waits, so that
    // completions (which free slots) can come.
    lock.unlock();
    Submit(pending);
    lock.lock();
    space_cv_.wait(lock, [&] { return lost_.load() || !free_list.empty(); });
  }
  if (lost_.load()) return false;
  const int index = free_list.back();
  free_list.pop_back();
  lock.unlock();
  auto* base = static_cast<uint8_t*>(pool_);
  uint8_t* p;
  if (r->needs_slot) {
    r->slot = index;
    p = base + static_cast<size_t>(index) * kSlotBytes;
  } else {
    r->word = index;
    p = base + kSlots * kSlotBytes + static_cast<size_t>(index) * 8;
  }
  if (r->copy_in != nullptr) std::memcpy(p, r->copy_in, r->bytes);
  const uint32_t length = r->needs_word ? 8 : static_cast<uint32_t>(r->bytes);
  r->sge = {reinterpret_cast<uintptr_t>(p), length, pool_mr_->lkey()};
  return true;
}

void VerbsTransport::Impl::Submit(std::vector<WorkRequest*>& pending) {
  if (pending.empty()) return;
  std::vector<WorkRequest*> refused;
  Status refusal;
  {
    std::unique_lock lock(mu_);
    const size_t depth = static_cast<size_t>(qp_->send_depth());
    space_cv_.wait(lock, [&] {
      return lost_.load() || outstanding_ + pending.size() <= depth;
    });
    if (lost_.load()) {
      refused = pending;
      refusal = lost_status_;
    } else {
      outstanding_ += pending.size();
      posted_seq_ += pending.size();
      if (broken_) {
        // The queue pair is being replaced: these go out after it.
        replay_.insert(replay_.end(), pending.begin(), pending.end());
      } else {
        const size_t posted = PostLocked(pending, &refusal);
        const size_t rest = pending.size() - posted;
        outstanding_ -= rest;
        completed_seq_ += rest;
        refused.assign(pending.begin() + static_cast<ptrdiff_t>(posted),
                       pending.end());
      }
    }
  }
  pending.clear();
  for (WorkRequest* r : refused) {
    {
      std::lock_guard lock(mu_);
      if (r->slot >= 0) free_slots_.push_back(r->slot);
      if (r->word >= 0) free_words_.push_back(r->word);
    }
    space_cv_.notify_all();
    r->op->Finish(refusal);
    delete r;
  }
}

size_t VerbsTransport::Impl::PostLocked(const std::vector<WorkRequest*>& chain,
                                        Status* why) {
  if (chain.empty()) return 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    chain[i]->wr.next = i + 1 < chain.size() ? &chain[i + 1]->wr : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_->qp(), &chain[0]->wr, &bad);
  size_t posted = chain.size();
  if (rc != 0) {
    // Credits keep the send queue from overflowing, so this is a broken
    // device or queue pair. What went out before `bad` completes as usual.
    posted = 0;
    while (posted < chain.size() && &chain[posted]->wr != bad) ++posted;
    *why = ErrnoStatus(StatusCode::kNetwork, "ibv_post_send to " + peer_, rc);
  }
  inflight_.insert(inflight_.end(), chain.begin(),
                   chain.begin() + static_cast<ptrdiff_t>(posted));
  return posted;
}

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
      char byte;
      ssize_t got = recv(fd_.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        DeclareLost(PeerLost(peer_ + " closed the connection"));
      } else if (got > 0) {
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
    const proto::VerbsControl& req) {
  proto::VerbsControlReply reply;
  Status s = SendMessage(fd_.get(), req);
  if (s.ok()) s = RecvMessage(fd_.get(), &reply);
  if (!s.ok()) {
    DeclareLost(
        PeerLost("control request to " + peer_ + " failed: " + s.ToString()));
    return LostStatus();
  }
  return reply;
}

Status VerbsTransport::Impl::Diagnose(const WorkRequest& r,
                                      ibv_wc_status status) {
  const std::string refused = std::string("the RDMA device refused (") +
                              ibv_wc_status_str(status) + ")";
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
  const int code = reply.code();
  if (code == 0) {
    return AccessDenied("region " + std::to_string(r.region_id) + " on " +
                        peer_ + ": " + refused +
                        ", though the region allows the access");
  }
  if (code < 0 || code > static_cast<int>(kLastStatusCode)) {
    return Internal("bad status code from " + peer_);
  }
  return Status(static_cast<StatusCode>(code), reply.message());
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

StatusOr<std::unique_ptr<VerbsTransport>> VerbsTransport::Create(
    std::shared_ptr<VerbsDevice> device, std::unique_ptr<QueuePair> qp,
    const proto::QueuePairInfo& peer_qp, net::UniqueFd fd,
    std::string peer_name, std::chrono::milliseconds peer_timeout) {
  auto impl =
      std::make_unique<Impl>(std::move(device), std::move(qp), std::move(fd),
                             std::move(peer_name), peer_timeout);
  PS_RETURN_IF_ERROR(impl->Start(peer_qp));
  return std::unique_ptr<VerbsTransport>(new VerbsTransport(std::move(impl)));
}

VerbsTransport::VerbsTransport(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
VerbsTransport::~VerbsTransport() = default;

Request VerbsTransport::Post(const Op& op) { return impl_->PostOps({&op, 1}); }
Request VerbsTransport::PostBatch(std::span<const Op> ops) {
  return impl_->PostOps(ops);
}
Status VerbsTransport::Flush() { return impl_->Flush(); }
bool VerbsTransport::lost() const { return impl_->lost(); }

}  // namespace ps::xfer::internal
