// internal::VerbsTransport::Impl: the state of a verbs connection's origin
// side, shared by the posting half (verbs_transport.cc: plans operations into
// work requests, gives them bounce slots, posts them) and the completion
// half (verbs_completion.cc: the progress thread, error diagnosis, queue pair
// recovery, Flush). See verbs_transport.h for the design. Thread-safety:
// callers post from any thread; the progress thread completes; mu_ guards
// what both touch.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/internal/request_state.h"
#include "core/verbs/verbs.pb.h"
#include "core/verbs/verbs_transport.h"

namespace ps::xfer::internal {

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
  // Moves bytes of a staged op to or from the target's staging buffer.
  bool staging = false;
  // What the request touches at the target, to ask why it was refused.
  uint64_t region_id = 0, key = 0, instance = 0, offset = 0, length = 0;
  uint32_t access = 0;
  uint8_t inline_data[kInlineBytes];
};

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
  // `events_claimed`: the caller holds a notification cell for each
  // put-with-notify into a kNotifyEvents region (PutNotifyWithEvent).
  Request PostOps(std::span<const Op> ops, bool events_claimed = false);
  // A put-with-notify into a kNotifyEvents region, complete on return:
  // claims a cell of the target's notification queue over the bootstrap
  // socket, posts the put, then has the target publish the event (or void
  // the cell when the put failed).
  Status PutNotifyWithEvent(const Op& op);
  Status Flush();
  bool lost() const { return lost_.load(std::memory_order_acquire); }

 private:
  // Appends `op`'s work requests to *plan; for an op on a staged region
  // plans nothing and sets *staged instead.
  Status Plan(const Op& op, bool events_claimed,
              std::vector<std::unique_ptr<WorkRequest>>* plan, bool* staged);
  // Why `region` cannot be reached by the NIC (its key has no address).
  Status Unreachable(const RemoteRegion& region) const;

  // Staged regions (verbs_transport.h). PostOps of a batch with an op on a
  // staged region: staged ops run one at a time, each after every earlier
  // op; the request is complete on return.
  Request PostWithStaged(std::span<const Op> ops, bool events_claimed);
  // One op on a staged region, complete on return; a failure is also kept
  // for the next Flush, as a failed work request's would be.
  Status RunStaged(const Op& op, bool events_claimed);
  Status StagedOp(const Op& op, bool events_claimed);
  Status StagedPut(const RemoteRegion& region, const Segment& s);
  Status StagedGet(const RemoteRegion& region, const Segment& s);
  // Asks for the target's staging buffer unless known (staging_mu_ held).
  Status LearnStagingLocked();
  // RDMA WRITE (`write`) or READ of `n` bytes between `local` and the start
  // of the target's staging buffer, complete on return (staging_mu_ held).
  Status StagingTransfer(void* local, size_t n, bool write);
  // Waits until every work request posted so far has completed, leaving
  // their errors to Flush.
  void AwaitPosted();
  // Remembers `value` as the last one stored at the notify word at
  // `address`; returns the one remembered before (0 if none).
  uint64_t SwapNotifyGuess(uint64_t address, uint64_t value);
  // Posts a notify store again after its compare-and-swap found `found`.
  void RetryNotifyStore(WorkRequest* r, uint64_t found);
  // Posts a planned batch: one request for all of it.
  Request PostPlan(std::vector<std::unique_ptr<WorkRequest>>& plan);
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
  // One request and its reply on the bootstrap socket; a failure declares
  // the peer lost. `bounded`: no reply within the peer timeout is a failure
  // too (staged operations, which have no NIC completion to time out; the
  // others may wait on the target, e.g. for room in its notification queue).
  StatusOr<proto::VerbsControlReply> Control(const proto::VerbsControl& req,
                                             bool bounded = false);
  // The status a control reply carries.
  Status ReplyStatus(const proto::VerbsControlReply& reply) const;
  Status LostStatus() {
    std::lock_guard lock(mu_);
    return lost_status_;
  }

  const std::shared_ptr<VerbsDevice> device_;
  std::unique_ptr<QueuePair> qp_;  // replaced by Recover under mu_
  net::UniqueFd fd_;
  std::mutex control_mu_;  // one control request at a time on fd_
  // Bumped as each control request starts and as it ends (odd while one is
  // in flight), so the progress thread, which watches fd_ for a closed
  // connection, tells a reply from bytes nobody asked for.
  std::atomic<uint64_t> control_seq_{0};
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

  // The target's staging buffer: one staged piece at a time uses it (from
  // writing it to reading it back).
  std::mutex staging_mu_;
  uint64_t staging_address_ = 0;  // guarded by staging_mu_; 0: not asked yet
  uint32_t staging_rkey_ = 0;     // guarded by staging_mu_
  uint64_t staging_bytes_ = 0;    // guarded by staging_mu_

  std::mutex guess_mu_;
  std::unordered_map<uint64_t, uint64_t> notify_guess_;  // by guess_mu_
  std::thread progress_;
};

}  // namespace ps::xfer::internal
