// ClientCounters: what a PsClient counts for monitoring when it is given
// one (PsClient::Options::counters): per shard, the times a push waited for
// inbox credit (the server's inbox full) and how long; and the kernels'
// quantization error of its pushes (kernels/quant_stats.h); its xfer
// context's reconnects and lost servers (core/link_stats.h). Owned by the
// caller and outliving the client, so a reader (worker/ps_worker_metrics.h)
// never depends on the client's lifetime. Thread-safe: relaxed atomics and
// QuantStats' own lock; counted on slow paths only (a wait for credit) or
// on a sample of the pushes (quantization error).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/link_stats.h"
#include "kernels/quant_stats.h"

namespace ps::worker {

struct ShardCounters {
  std::atomic<uint64_t> credit_waits{0};    // pushes that waited for credit
  std::atomic<uint64_t> credit_wait_ns{0};  // time spent waiting
};

class ClientCounters {
 public:
  explicit ClientCounters(uint32_t shards)
      : shards_(shards), per_shard_(new ShardCounters[shards]) {}
  ClientCounters(const ClientCounters&) = delete;
  ClientCounters& operator=(const ClientCounters&) = delete;

  uint32_t shards() const { return shards_; }
  // Null for a shard past shards().
  ShardCounters* shard(uint32_t s) const {
    return s < shards_ ? &per_shard_[s] : nullptr;
  }
  kernels::QuantStats& quant() { return quant_; }
  const kernels::QuantStats& quant() const { return quant_; }
  const std::shared_ptr<xfer::LinkCounters>& link() const { return link_; }

 private:
  const uint32_t shards_;
  std::unique_ptr<ShardCounters[]> per_shard_;
  kernels::QuantStats quant_{true};
  const std::shared_ptr<xfer::LinkCounters> link_ =
      std::make_shared<xfer::LinkCounters>();
};

}  // namespace ps::worker
