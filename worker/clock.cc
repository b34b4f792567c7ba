#include "worker/clock.h"

#include <algorithm>
#include <vector>

#include "worker/backoff.h"

namespace ps::worker {

Status PublishClock(ClientContext& ctx, uint64_t clock) {
  ServerLink& s0 = *ctx.servers[0];
  Status s = s0.endpoint->Put(&clock, sizeof(clock), s0.status,
                              ctx.words.ClockOffset(ctx.worker_id));
  if (s.ok()) s = s0.endpoint->Flush();
  return s.ok() ? s : s.WithContext(s0.name + ": clock word");
}

StatusOr<uint64_t> ReadMinClock(ClientContext& ctx) {
  ServerLink& s0 = *ctx.servers[0];
  std::vector<uint64_t> clocks(ctx.num_workers);
  Status s = s0.endpoint->Get(clocks.data(), 8 * clocks.size(), s0.status,
                              ctx.words.ClockOffset(0));
  if (!s.ok()) return s.WithContext(s0.name + ": clock words");
  return *std::min_element(clocks.begin(), clocks.end());
}

Status WaitMinClock(ClientContext& ctx, uint64_t target) {
  Backoff backoff(ctx.timeout_ms);
  uint64_t last = 0;
  for (;;) {
    PS_ASSIGN_OR_RETURN(uint64_t min, ReadMinClock(ctx));
    if (min >= target) return Status::OK();
    if (min != last) backoff.Progress();
    last = min;
    if (!backoff.Wait()) {
      return Timeout("worker " + std::to_string(ctx.worker_id) + " waited " +
                     std::to_string(ctx.timeout_ms) +
                     " ms for every worker to reach clock " +
                     std::to_string(target) + "; the slowest is at " +
                     std::to_string(min));
    }
  }
}

Status WaitAllApplied(ClientContext& ctx) {
  for (auto& link : ctx.servers) {
    PS_RETURN_IF_ERROR(link->inbox->Flush());
    PS_RETURN_IF_ERROR(link->inbox->WaitApplied());
  }
  return Status::OK();
}

}  // namespace ps::worker
