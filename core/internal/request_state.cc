#include "core/internal/request_state.h"

#include <sched.h>
#include <time.h>

namespace ps::xfer::internal {
namespace {

// How long a waiter polls before it sleeps. A loopback round trip takes
// 15-30 us; polling for about that long saves the wake-up of a sleeping
// thread (several us) on small operations, while yielding keeps the core
// available to the threads that produce the reply.
constexpr long long kSpinNanos = 30'000;
// Pure pause instructions before the first clock read and the first yield.
constexpr int kPauseRounds = 64;

}  // namespace

long long MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool SpinDeadlinePassed(long long start_ns, int round) {
  if (round < kPauseRounds) return false;
  sched_yield();
  return MonotonicNanos() - start_ns > kSpinNanos;
}

void RequestState::Complete(Status status) {
  std::lock_guard lock(mu_);
  if (!status.ok() && status_.ok()) status_ = std::move(status);
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1 && sleepers_ > 0) {
    cv_.notify_all();
  }
}

Status RequestState::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

Status RequestState::Wait() {
  if (!SpinBriefly([this] { return done(); })) {
    std::unique_lock lock(mu_);
    ++sleepers_;
    cv_.wait(lock, [this] { return done(); });
    --sleepers_;
  }
  return status();
}

}  // namespace ps::xfer::internal
