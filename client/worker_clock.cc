#include "client/worker_clock.h"

#include <algorithm>
#include <vector>

#include "client/backoff.h"

namespace ps::worker {

Status WorkerClock::Resume() {
  ServerLink& s0 = servers_[0];
  uint64_t clock = 0;
  PS_RETURN_IF_ERROR(s0.endpoint().Get(&clock, 8, s0.status(),
                                       words_.ClockOffset(options_.worker_id)));
  clock_.store(clock);
  return Status::OK();
}

StatusOr<uint64_t> WorkerClock::Advance() {
  const uint64_t next = clock_.load() + 1;
  const proto::Consistency c = options_.consistency;
  if (c == proto::CONSISTENCY_BSP) PS_RETURN_IF_ERROR(servers_.WaitApplied());
  PS_RETURN_IF_ERROR(Publish(next));
  clock_.store(next);
  if (c == proto::CONSISTENCY_BSP) {
    PS_RETURN_IF_ERROR(WaitMinClock(next));
  } else if (c == proto::CONSISTENCY_SSP && next > options_.staleness) {
    PS_RETURN_IF_ERROR(WaitMinClock(next - options_.staleness));
  }
  return next;
}

Status WorkerClock::Barrier() {
  const uint64_t next = clock_.load() + 1;
  PS_RETURN_IF_ERROR(servers_.WaitApplied());
  PS_RETURN_IF_ERROR(Publish(next));
  clock_.store(next);
  return WaitMinClock(next);
}

Status WorkerClock::Publish(uint64_t clock) {
  ServerLink& s0 = servers_[0];
  Status s = s0.endpoint().Put(&clock, sizeof(clock), s0.status(),
                               words_.ClockOffset(options_.worker_id));
  if (s.ok()) s = s0.endpoint().Flush();
  return s.ok() ? s : s.WithContext(s0.name() + ": clock word");
}

StatusOr<uint64_t> WorkerClock::MinClock() {
  ServerLink& s0 = servers_[0];
  std::vector<uint64_t> clocks(options_.num_workers);
  Status s = s0.endpoint().Get(clocks.data(), 8 * clocks.size(), s0.status(),
                               words_.ClockOffset(0));
  if (!s.ok()) return s.WithContext(s0.name() + ": clock words");
  return *std::min_element(clocks.begin(), clocks.end());
}

Status WorkerClock::WaitMinClock(uint64_t target) {
  Backoff backoff(options_.timeout_ms);
  uint64_t last = 0;
  for (;;) {
    PS_ASSIGN_OR_RETURN(uint64_t min, MinClock());
    if (min >= target) return Status::OK();
    if (min != last) backoff.Progress();
    last = min;
    if (!backoff.Wait()) {
      return Timeout("worker " + std::to_string(options_.worker_id) +
                     " waited " + std::to_string(options_.timeout_ms) +
                     " ms for every worker to reach clock " +
                     std::to_string(target) + "; the slowest is at " +
                     std::to_string(min));
    }
  }
}

}  // namespace ps::worker
