// ServerStats: the counters a shard keeps while it runs, shared by the apply
// threads, the control connections and the stats log. Every field is an
// atomic so any thread may bump or read it without a lock; a snapshot is not
// a consistent cut (counters are read one by one), which is fine for
// monitoring and for tests that read after the traffic stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "protocol/ps.pb.h"
#include "table/table_counters.h"

namespace ps::server {

// Why a packet was rejected (the metrics' "reason" label).
enum class RejectReason : uint8_t {
  kSlot,     // slot header: length word past the slot
  kHeader,   // packet header: magic, version, lengths, shard
  kTable,    // unknown table, or an EXACT one (not pushed through inboxes)
  kPayload,  // decode: checksum, row bounds, dim, non-finite values
  kApply,    // the table refused the rows
};
inline constexpr int kNumRejectReasons = 5;
// "slot", "header", "table", "payload", "apply".
const char* RejectReasonName(RejectReason reason);

class ServerStats {
 public:
  explicit ServerStats(uint32_t num_workers);

  // Apply threads: a packet of `bytes` from the inbox of `worker` applied
  // `rows` rows. Per-sender counters have one writer (the inbox's owner
  // thread); all are relaxed atomics, a few per packet.
  void PacketApplied(uint64_t rows) {
    packets_applied_.fetch_add(1, std::memory_order_relaxed);
    rows_applied_.fetch_add(rows, std::memory_order_relaxed);
  }
  void PacketApplied(uint32_t worker, uint64_t rows, uint64_t bytes) {
    PacketApplied(rows);
    if (worker >= num_workers_) return;
    PerWorker& w = per_worker_[worker];
    w.packets.fetch_add(1, std::memory_order_relaxed);
    w.rows.fetch_add(rows, std::memory_order_relaxed);
    w.bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  // Apply threads: a lookup packet answered `keys` keys (not counted as a
  // packet applied; a refused one is counted as rejected).
  void LookupAnswered(uint64_t keys) {
    lookups_answered_.fetch_add(1, std::memory_order_relaxed);
    lookup_keys_.fetch_add(keys, std::memory_order_relaxed);
  }
  uint64_t lookups_answered() const {
    return lookups_answered_.load(std::memory_order_relaxed);
  }
  uint64_t lookup_keys() const {
    return lookup_keys_.load(std::memory_order_relaxed);
  }
  // Counts a rejected packet from the inbox of `worker`; returns true the
  // first time this worker has a packet rejected (the caller logs then, and
  // only then, so a misbehaving worker cannot flood the log).
  bool PacketRejected(uint32_t worker);
  bool PacketRejected(uint32_t worker, RejectReason reason);

  uint64_t packets_applied() const {
    return packets_applied_.load(std::memory_order_relaxed);
  }
  uint64_t packets_rejected() const {
    return packets_rejected_.load(std::memory_order_relaxed);
  }
  uint64_t rows_applied() const {
    return rows_applied_.load(std::memory_order_relaxed);
  }
  uint64_t rejected_from(uint32_t worker) const;
  uint32_t num_workers() const { return num_workers_; }
  // Per sender (0 for a worker out of range).
  uint64_t packets_applied_from(uint32_t worker) const;
  uint64_t rows_applied_from(uint32_t worker) const;
  uint64_t bytes_applied_from(uint32_t worker) const;
  uint64_t rejected_from(uint32_t worker, RejectReason reason) const;

  // `exact`: the exact-key tables' counters, summed over the tables.
  proto::StatsReply ToProto(const table::TableCounters& exact) const;
  // One line for the log: "applied 1200 packets (3100000 rows), rejected 1
  // (worker-2: 1), exact rows 40 (evicted 3, pending 7, dropped pushes 12,
  // refused for memory 0)".
  std::string ToLogLine(const table::TableCounters& exact) const;

 private:
  const uint32_t num_workers_;
  std::atomic<uint64_t> packets_applied_{0};
  std::atomic<uint64_t> packets_rejected_{0};
  std::atomic<uint64_t> rows_applied_{0};
  std::atomic<uint64_t> lookups_answered_{0};
  std::atomic<uint64_t> lookup_keys_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> rejected_by_worker_;
  struct PerWorker {
    std::atomic<uint64_t> packets{0}, rows{0}, bytes{0};
    std::atomic<uint64_t> rejected[kNumRejectReasons] = {};
  };
  std::unique_ptr<PerWorker[]> per_worker_;
};

// "worker-3": how logs and the stats map name a worker.
std::string WorkerName(uint32_t worker);

}  // namespace ps::server
