// internal::PollBackoff: decides whether a thread that waits for the next
// request on a socket may poll it for a few microseconds before it blocks,
// and PollBeforeBlocking, the loop that does so.
//
// Polling keeps the thread awake, so a request that arrives soon finds it
// running instead of waiting for the kernel to wake it (15-30 us on a VM
// whose vCPU halted in the meantime: most of a loopback round trip). But a
// polling thread stays runnable, and when another thread busy-waits on the
// same core the scheduler may leave it off the CPU for a whole tick
// (milliseconds) where a blocked thread would have preempted the spinner as
// soon as its data arrived. A yield that kept the poller off the CPU for
// longer than kStarvedNs shows this happening; polling then stops for a
// pause that doubles each time it happens again, and starts over once a poll
// catches a request without being starved. The pause stays short (at most
// kMaxPauseNs) so that polling resumes soon after the busy thread is gone.
//
// Thread-compatible: one per polling thread.
#pragma once

#include <sched.h>

#include "base/status_or.h"
#include "core/internal/request_state.h"

namespace ps::xfer::internal {

class PollBackoff {
 public:
  // How long one poll lasts before the caller blocks: as long as any
  // waiter's spin (core/internal/request_state.h).
  static constexpr long long kPollNs = kWaiterSpinNanos;
  // A yield that took longer than this was a lost time slice, not a yield.
  static constexpr long long kStarvedNs = 200'000;
  static constexpr long long kFirstPauseNs = 10'000'000;
  static constexpr long long kMaxPauseNs = 200'000'000;

  bool may_poll(long long now_ns) const { return now_ns >= paused_until_ns_; }
  long long pause_ns() const { return pause_ns_; }

  // Reports a yield during a poll, by the clock before and after it. Returns
  // true when the poll was starved and must stop.
  bool AfterYield(long long before_ns, long long after_ns);
  // Reports that a poll caught a request and no yield starved: the next
  // pause is the first again.
  void Caught();

 private:
  long long paused_until_ns_ = 0;
  long long pause_ns_ = kFirstPauseNs;
};

// Polls `try_read` (a callable returning StatusOr<bool>: whether a request
// began to arrive) for up to PollBackoff::kPollNs, when `backoff` allows.
// Returns whether it arrived; the caller blocks for it when not.
template <typename TryRead>
StatusOr<bool> PollBeforeBlocking(PollBackoff& backoff, TryRead try_read) {
  const long long start = MonotonicNanos();
  if (!backoff.may_poll(start)) return false;
  for (int round = 0;; ++round) {
    StatusOr<bool> got = try_read();
    if (!got.ok() || *got) {
      if (got.ok()) backoff.Caught();
      return got;
    }
    if (round < kWaiterPauseRounds) {
      CpuRelax();
      continue;
    }
    const long long before = MonotonicNanos();
    if (before - start > PollBackoff::kPollNs) return false;
    sched_yield();
    if (backoff.AfterYield(before, MonotonicNanos())) return try_read();
  }
}

}  // namespace ps::xfer::internal
