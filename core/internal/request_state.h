// internal::RequestState: completion state shared between the thread that
// posted an operation and the progress thread that completes it.
//
// Wait() spins for a few microseconds (a reply on loopback often arrives that
// fast) and then sleeps on a condition variable, so a waiting thread does not
// hold a core the peer process may need. A RequestState never times out by
// itself: the transport that owns it guarantees to complete it, with
// kPeerLost at the latest when its peer timeout passes without progress.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "base/status.h"

namespace ps::xfer::internal {

class RequestState {
 public:
  // The request is done once `pending` sub-operations have completed.
  explicit RequestState(int pending = 1) : pending_(pending) {}
  RequestState(const RequestState&) = delete;
  RequestState& operator=(const RequestState&) = delete;

  // Called by the progress side once per sub-operation. The first error
  // wins. Everything the progress side wrote before (Get data, atomic
  // results) is visible to a thread that then sees done().
  void Complete(Status status);

  bool done() const { return pending_.load(std::memory_order_acquire) <= 0; }
  // Precondition: done().
  Status status() const;
  // Blocks until done; returns status().
  Status Wait();

 private:
  std::atomic<int> pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int sleepers_ = 0;  // guarded by mu_: threads blocked in cv_
  Status status_;     // guarded by mu_
};

// How long a waiter polls before it sleeps. A loopback round trip takes
// 15-30 us; polling for about that long saves the wake-up of a sleeping
// thread (several us) on small operations, while yielding keeps the core
// available to the threads that produce the reply.
inline constexpr long long kWaiterSpinNanos = 30'000;
// Pure pause instructions before the first clock read and the first yield.
inline constexpr int kWaiterPauseRounds = 64;

// Spins for a few microseconds until `ready()` holds, pausing the CPU between
// polls and yielding once the first microseconds passed. Returns ready().
template <typename Ready>
bool SpinBriefly(Ready ready);

// Implementation detail of SpinBriefly.
void CpuRelax();
bool SpinDeadlinePassed(long long start_ns, int round);
long long MonotonicNanos();

template <typename Ready>
bool SpinBriefly(Ready ready) {
  const long long start = MonotonicNanos();
  for (int round = 0;; ++round) {
    if (ready()) return true;
    if (SpinDeadlinePassed(start, round)) return ready();
    CpuRelax();
  }
}

}  // namespace ps::xfer::internal
