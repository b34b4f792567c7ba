#include "core/internal/request_state.h"

#include <sched.h>
#include <time.h>

namespace ps::xfer::internal {

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
  if (round < kWaiterPauseRounds) return false;
  sched_yield();
  return MonotonicNanos() - start_ns > kWaiterSpinNanos;
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
