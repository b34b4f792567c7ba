// Worker clocks for BSP and SSP, kept in shard 0's status region: word
// ClockOffset(w) is worker w's clock, written only by worker w (one-sided
// Put) and read by everyone (one Get of the whole clock array).
//
// Barrier reuses the clocks: it is a clock step with BSP semantics (every
// push applied, then wait for every worker to reach this clock). So a
// worker's clock counts its Clock() and Barrier() calls together; workers
// that mix them must do so in the same order.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "base/status_or.h"
#include "worker/client_context.h"

namespace ps::worker {

// Publishes `clock` as this worker's clock (Put + Flush).
Status PublishClock(ClientContext& ctx, uint64_t clock);
// The smallest clock over all workers.
StatusOr<uint64_t> ReadMinClock(ClientContext& ctx);
// Polls until the smallest clock >= target (kTimeout after timeout_ms
// without progress).
Status WaitMinClock(ClientContext& ctx, uint64_t target);
// Every server consumed every packet this worker wrote.
Status WaitAllApplied(ClientContext& ctx);

}  // namespace ps::worker
