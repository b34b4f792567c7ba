#include "core/verbs/verbs_transport.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/access.h"
#include "core/verbs/verbs_remote_key.h"
#include "core/verbs/verbs_transport_impl.h"

namespace ps::xfer::internal {

QueuePairOptions OriginQueuePairOptions() {
  QueuePairOptions o;
  o.send_depth = 1024;
  o.max_sge = 1;
  o.max_inline = static_cast<int>(kInlineBytes);
  o.completion_channel = true;
  return o;
}

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

Status VerbsTransport::Impl::Unreachable(const RemoteRegion& region) const {
  if (VerbsKeyOf(region).staged) {
    // Only a notify word gets here: staged data takes RunStaged.
    return NotSupported("region " + std::to_string(region.id()) + " on " +
                        peer_ +
                        " is staged by its CPU (device memory its RDMA device "
                        "cannot reach), which takes no notify words");
  }
  return NotSupported("region " + std::to_string(region.id()) + " on " + peer_ +
                      " is not registered with an RDMA device");
}

Status VerbsTransport::Impl::Plan(
    const Op& op, bool events_claimed,
    std::vector<std::unique_ptr<WorkRequest>>* plan, bool* staged) {
  auto target = [&](const RemoteRegion& region) -> StatusOr<uint64_t> {
    uint64_t base = VerbsKeyOf(region).address;
    if (base == 0) [[unlikely]] {
      return Unreachable(region);
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

  StatusOr<uint64_t> reached = target(*op.remote);
  if (!reached.ok()) [[unlikely]] {
    // Checked only here, where the NIC cannot reach the region anyway: the
    // host path pays nothing for staging.
    if (!VerbsKeyOf(*op.remote).staged) return reached.status();
    *staged = true;
    return Status::OK();
  }
  const uint64_t base = *reached;
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
      if ((op.notify_remote->access() & kNotifyEvents) && !events_claimed) {
        return Internal(
            "a put-with-notify with an event not through "
            "PutNotifyWithEvent");
      }
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

Request VerbsTransport::Impl::PostOps(std::span<const Op> ops,
                                      bool events_claimed) {
  if (lost()) return Request(LostStatus());
  std::vector<std::unique_ptr<WorkRequest>> plan;
  bool staged = false;
  for (const Op& op : ops) {
    Status s = Plan(op, events_claimed, &plan, &staged);
    if (!s.ok()) return Request(std::move(s));
  }
  if (staged) [[unlikely]] {
    return PostWithStaged(ops, events_claimed);
  }
  return PostPlan(plan);
}

Request VerbsTransport::Impl::PostPlan(
    std::vector<std::unique_ptr<WorkRequest>>& plan) {
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

namespace {

// A staged segment's remote range must not wrap: its pieces' offsets are
// computed from it.
Status CheckStagedRange(const RemoteRegion& region, const Segment& s,
                        const std::string& peer) {
  if (s.length > UINT64_MAX - s.remote_offset) {
    return OutOfRange("offset " + std::to_string(s.remote_offset) + " + " +
                      std::to_string(s.length) + " is past the end of region " +
                      std::to_string(region.id()) + " on " + peer);
  }
  return Status::OK();
}

// The control request of a staged operation on `region`'s bytes
// [offset, offset + length).
proto::VerbsControl StagedRequest(proto::VerbsControl::Op op,
                                  const RemoteRegion& region, uint64_t offset,
                                  uint64_t length) {
  proto::VerbsControl req;
  req.set_op(op);
  req.set_region_id(region.id());
  req.set_key(region.key());
  req.set_instance(region.instance());
  req.set_offset(offset);
  req.set_length(length);
  return req;
}

}  // namespace

Request VerbsTransport::Impl::PostWithStaged(std::span<const Op> ops,
                                             bool events_claimed) {
  // The plan made for the batch is dropped (nothing of it was posted); the
  // notify guesses it took are only guesses (a wrong one costs a retry).
  std::vector<Request> posted;
  for (const Op& op : ops) {
    if (VerbsKeyOf(*op.remote).staged) {
      posted.emplace_back(RunStaged(op, events_claimed));
    } else {
      posted.push_back(PostOps({&op, 1}, events_claimed));
    }
  }
  Status first;
  for (Request& r : posted) {
    Status s = r.Wait();
    if (first.ok()) first = std::move(s);
  }
  return Request(std::move(first));
}

void VerbsTransport::Impl::AwaitPosted() {
  std::unique_lock lock(mu_);
  const uint64_t target = posted_seq_;
  flush_cv_.wait(lock, [&] { return completed_seq_ >= target; });
}

Status VerbsTransport::Impl::RunStaged(const Op& op, bool events_claimed) {
  if (lost()) return LostStatus();
  // Ordering: what was posted before this op takes effect first, and this
  // op is complete before anything posted after it (it returns done). That
  // is Flush's order, stronger than the fences ask.
  AwaitPosted();
  Status s = StagedOp(op, events_claimed);
  if (!s.ok()) {
    std::lock_guard lock(mu_);
    if (first_error_.ok()) first_error_ = s;
  }
  return s;
}

Status VerbsTransport::Impl::StagedOp(const Op& op, bool events_claimed) {
  const RemoteRegion& region = *op.remote;
  switch (op.type) {
    case OpType::kPut:
    case OpType::kWriteV:
      for (const Segment& s : op.segs()) {
        PS_RETURN_IF_ERROR(StagedPut(region, s));
      }
      return Status::OK();
    case OpType::kGet:
    case OpType::kReadV:
      for (const Segment& s : op.segs()) {
        PS_RETURN_IF_ERROR(StagedGet(region, s));
      }
      return Status::OK();
    case OpType::kFetchAdd:
    case OpType::kCompareSwap: {
      // The target checks the word as for any atomic, then refuses it.
      PS_ASSIGN_OR_RETURN(
          proto::VerbsControlReply reply,
          Control(StagedRequest(proto::VerbsControl::STAGED_ATOMIC, region,
                                op.single.remote_offset, sizeof(uint64_t)),
                  /*bounded=*/true));
      Status s = ReplyStatus(reply);
      if (s.ok()) return Internal(peer_ + " ran an atomic on a staged region");
      return s;
    }
    case OpType::kPutNotify: {
      // A word the NIC cannot store is refused before any data moves.
      const RemoteRegion& word = *op.notify_remote;
      if (VerbsKeyOf(word).address == 0) return Unreachable(word);
      PS_RETURN_IF_ERROR(StagedPut(region, op.single));
      // The data is in place (the target replied after its copy): now the
      // word, stored by the NIC as for host data (Plan's flag store; no data
      // of its own).
      Op flag = op;
      flag.remote = op.notify_remote;
      flag.single = Segment{op.single.local, 0, 0};
      return PostOps({&flag, 1}, events_claimed).Wait();
    }
  }
  return Internal("unknown operation");
}

Status VerbsTransport::Impl::LearnStagingLocked() {
  if (staging_address_ != 0) return Status::OK();
  proto::VerbsControl req;
  req.set_op(proto::VerbsControl::STAGING_BUFFER);
  PS_ASSIGN_OR_RETURN(proto::VerbsControlReply reply,
                      Control(req, /*bounded=*/true));
  PS_RETURN_IF_ERROR(ReplyStatus(reply).WithContext("staging buffer"));
  if (reply.staging_address() == 0 || reply.staging_bytes() == 0) {
    return NetworkError(peer_ + " offered no staging buffer");
  }
  staging_address_ = reply.staging_address();
  staging_rkey_ = reply.staging_rkey();
  // A piece must fit one work request (2 GiB) as well as the buffer.
  staging_bytes_ = std::min<uint64_t>(reply.staging_bytes(), 1u << 30);
  return Status::OK();
}

Status VerbsTransport::Impl::StagingTransfer(void* local, size_t n,
                                             bool write) {
  std::vector<std::unique_ptr<WorkRequest>> plan;
  auto make = [&](uint64_t at, size_t length) {
    auto r = std::make_unique<WorkRequest>();
    r->wr.wr_id = reinterpret_cast<uintptr_t>(r.get());
    r->wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    r->wr.send_flags = IBV_SEND_SIGNALED;
    r->wr.sg_list = &r->sge;
    r->wr.num_sge = 1;
    r->wr.wr.rdma.remote_addr = staging_address_ + at;
    r->wr.wr.rdma.rkey = staging_rkey_;
    r->staging = true;
    r->offset = at;
    r->length = length;
    return r;
  };
  auto* bytes = static_cast<uint8_t*>(local);
  uint32_t lkey = 0;
  if (device_->FindLocal(local, n, &lkey)) {
    auto r = make(0, n);
    r->sge = {reinterpret_cast<uintptr_t>(local), static_cast<uint32_t>(n),
              lkey};
    plan.push_back(std::move(r));
  } else {
    for (size_t pos = 0; pos < n; pos += kSlotBytes) {
      const size_t m = std::min(kSlotBytes, n - pos);
      auto r = make(pos, m);
      r->needs_slot = true;
      if (write) {
        r->copy_in = bytes + pos;
      } else {
        r->copy_out = bytes + pos;
      }
      r->bytes = m;
      plan.push_back(std::move(r));
    }
  }
  return PostPlan(plan).Wait();
}

Status VerbsTransport::Impl::StagedPut(const RemoteRegion& region,
                                       const Segment& s) {
  PS_RETURN_IF_ERROR(CheckStagedRange(region, s, peer_));
  auto* bytes = static_cast<uint8_t*>(s.local);
  for (uint64_t done = 0; done < s.length;) {
    std::lock_guard lock(staging_mu_);
    PS_RETURN_IF_ERROR(LearnStagingLocked());
    const size_t n = std::min<uint64_t>(staging_bytes_, s.length - done);
    // The piece is in the staging buffer once its WRITE completed; only
    // then may the target copy it.
    PS_RETURN_IF_ERROR(StagingTransfer(bytes + done, n, /*write=*/true));
    // The target checks the whole rest of the segment with the first
    // piece: a put past the end writes nothing, as on the NIC path.
    proto::VerbsControl req =
        StagedRequest(proto::VerbsControl::STAGED_PUT, region,
                      s.remote_offset + done, s.length - done);
    req.set_piece(n);
    PS_ASSIGN_OR_RETURN(proto::VerbsControlReply reply,
                        Control(req, /*bounded=*/true));
    PS_RETURN_IF_ERROR(ReplyStatus(reply));
    done += n;
  }
  return Status::OK();
}

Status VerbsTransport::Impl::StagedGet(const RemoteRegion& region,
                                       const Segment& s) {
  PS_RETURN_IF_ERROR(CheckStagedRange(region, s, peer_));
  auto* bytes = static_cast<uint8_t*>(s.local);
  for (uint64_t done = 0; done < s.length;) {
    std::lock_guard lock(staging_mu_);
    PS_RETURN_IF_ERROR(LearnStagingLocked());
    const size_t n = std::min<uint64_t>(staging_bytes_, s.length - done);
    const proto::VerbsControl req = StagedRequest(
        proto::VerbsControl::STAGED_GET, region, s.remote_offset + done, n);
    PS_ASSIGN_OR_RETURN(proto::VerbsControlReply reply,
                        Control(req, /*bounded=*/true));
    PS_RETURN_IF_ERROR(ReplyStatus(reply));
    // The target copied the piece into its staging buffer before replying.
    PS_RETURN_IF_ERROR(StagingTransfer(bytes + done, n, /*write=*/false));
    done += n;
  }
  return Status::OK();
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

Status VerbsTransport::Impl::PutNotifyWithEvent(const Op& op) {
  if (lost()) return LostStatus();
  const RemoteRegion& word = *op.notify_remote;
  proto::VerbsControl claim;
  claim.set_op(proto::VerbsControl::CLAIM_NOTIFICATION);
  claim.set_region_id(word.id());
  claim.set_key(word.key());
  claim.set_instance(word.instance());
  claim.set_offset(op.notify_offset);
  PS_ASSIGN_OR_RETURN(proto::VerbsControlReply claimed, Control(claim));
  PS_RETURN_IF_ERROR(ReplyStatus(claimed));
  const Status put = PostOps({&op, 1}, /*events_claimed=*/true).Wait();
  proto::VerbsControl finish;
  finish.set_op(put.ok() ? proto::VerbsControl::PUBLISH_NOTIFICATION
                         : proto::VerbsControl::VOID_NOTIFICATION);
  finish.set_cell(claimed.cell());
  finish.set_value(op.notify_value);
  StatusOr<proto::VerbsControlReply> finished = Control(finish);
  if (!put.ok()) return put;
  if (!finished.ok()) return finished.status();
  return ReplyStatus(*finished);
}

namespace {

bool WantsEvent(const Op& op) {
  return op.type == OpType::kPutNotify &&
         (op.notify_remote->access() & kNotifyEvents);
}

}  // namespace

Request VerbsTransport::Post(const Op& op) {
  if (WantsEvent(op)) return Request(impl_->PutNotifyWithEvent(op));
  return impl_->PostOps({&op, 1});
}

Request VerbsTransport::PostBatch(std::span<const Op> ops) {
  if (std::none_of(ops.begin(), ops.end(), WantsEvent)) {
    return impl_->PostOps(ops);
  }
  // Events take round trips of their own: the batch runs op by op.
  Status first;
  for (const Op& op : ops) {
    Status s = WantsEvent(op) ? impl_->PutNotifyWithEvent(op)
                              : impl_->PostOps({&op, 1}).Wait();
    if (first.ok()) first = std::move(s);
  }
  return Request(std::move(first));
}
Status VerbsTransport::Flush() { return impl_->Flush(); }
bool VerbsTransport::lost() const { return impl_->lost(); }

}  // namespace ps::xfer::internal
