// WorkerClock: this worker's step clock and the consistency model it
// enforces (the servers' --consistency). The clocks live in shard 0's
// status region: word ClockOffset(w) is worker w's clock, written only by
// worker w (one-sided Put) and read by everyone (one Get of the whole clock
// array).
//
// Barrier reuses the clocks: it is a clock step with BSP semantics (every
// push applied, then wait for every worker to reach this clock). So a
// worker's clock counts its Advance() and Barrier() calls together; workers
// that mix them must do so in the same order.
//
// Thread-safe for current(); Advance, Barrier and Resume are called by one
// thread per worker (PsClient's contract for Clock and Barrier).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "client/server_group.h"
#include "protocol/ps.pb.h"
#include "protocol/status_words.h"

namespace ps::worker {

class WorkerClock {
 public:
  struct Options {
    uint32_t worker_id = 0;
    uint32_t num_workers = 1;
    int timeout_ms = 30000;  // a wait without progress for this long fails
    proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
    uint32_t staleness = 0;  // ssp
  };

  // `servers` must outlive the clock.
  WorkerClock(const Options& options, ServerGroup& servers)
      : options_(options), words_{options.num_workers}, servers_(servers) {}

  // Continues from the clock this worker had published (a reconnect).
  Status Resume();

  uint64_t current() const { return clock_.load(std::memory_order_relaxed); }
  uint32_t worker_id() const { return options_.worker_id; }

  // Ends this worker's step. async: returns once the new clock is
  // published. bsp: once every push of this worker is applied and every
  // worker reached the new clock. ssp: once the slowest worker is at most
  // `staleness` steps behind. Returns the new clock.
  StatusOr<uint64_t> Advance();
  // A clock step with bsp semantics whatever the consistency.
  Status Barrier();
  // The smallest clock over all workers, read now.
  StatusOr<uint64_t> MinClock();

 private:
  // Publishes `clock` as this worker's clock (Put + Flush).
  Status Publish(uint64_t clock);
  // Polls until the smallest clock >= target (kTimeout after timeout_ms
  // without progress).
  Status WaitMinClock(uint64_t target);

  const Options options_;
  const protocol::StatusWords words_;
  ServerGroup& servers_;
  std::atomic<uint64_t> clock_{0};
};

}  // namespace ps::worker
