#include "server/server_stats.h"

namespace ps::server {

std::string WorkerName(uint32_t worker) {
  return "worker-" + std::to_string(worker);
}

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kSlot:
      return "slot";
    case RejectReason::kHeader:
      return "header";
    case RejectReason::kTable:
      return "table";
    case RejectReason::kPayload:
      return "payload";
    case RejectReason::kApply:
      return "apply";
  }
  return "unknown";
}

ServerStats::ServerStats(uint32_t num_workers)
    : num_workers_(num_workers),
      rejected_by_worker_(new std::atomic<uint64_t>[num_workers]),
      per_worker_(new PerWorker[num_workers]) {
  for (uint32_t w = 0; w < num_workers; ++w) rejected_by_worker_[w] = 0;
}

bool ServerStats::PacketRejected(uint32_t worker) {
  packets_rejected_.fetch_add(1, std::memory_order_relaxed);
  if (worker >= num_workers_) return false;
  return rejected_by_worker_[worker].fetch_add(1, std::memory_order_relaxed) ==
         0;
}

bool ServerStats::PacketRejected(uint32_t worker, RejectReason reason) {
  if (worker < num_workers_) {
    per_worker_[worker].rejected[static_cast<int>(reason)].fetch_add(
        1, std::memory_order_relaxed);
  }
  return PacketRejected(worker);
}

uint64_t ServerStats::packets_applied_from(uint32_t worker) const {
  if (worker >= num_workers_) return 0;
  return per_worker_[worker].packets.load(std::memory_order_relaxed);
}

uint64_t ServerStats::rows_applied_from(uint32_t worker) const {
  if (worker >= num_workers_) return 0;
  return per_worker_[worker].rows.load(std::memory_order_relaxed);
}

uint64_t ServerStats::bytes_applied_from(uint32_t worker) const {
  if (worker >= num_workers_) return 0;
  return per_worker_[worker].bytes.load(std::memory_order_relaxed);
}

uint64_t ServerStats::rejected_from(uint32_t worker,
                                    RejectReason reason) const {
  if (worker >= num_workers_) return 0;
  return per_worker_[worker].rejected[static_cast<int>(reason)].load(
      std::memory_order_relaxed);
}

uint64_t ServerStats::rejected_from(uint32_t worker) const {
  if (worker >= num_workers_) return 0;
  return rejected_by_worker_[worker].load(std::memory_order_relaxed);
}

proto::StatsReply ServerStats::ToProto(
    const table::TableCounters& exact) const {
  proto::StatsReply r;
  r.set_packets_applied(packets_applied());
  r.set_packets_rejected(packets_rejected());
  r.set_rows_applied(rows_applied());
  r.set_exact_rows(exact.rows);
  r.set_exact_evicted(exact.evicted);
  r.set_exact_admission_pending(exact.admission_pending);
  r.set_exact_rows_on_disk(exact.rows_on_disk);
  r.set_exact_demoted(exact.demoted);
  r.set_exact_promoted(exact.promoted);
  r.set_lookups_answered(lookups_answered());
  r.set_lookup_keys(lookup_keys());
  for (uint32_t w = 0; w < num_workers_; ++w) {
    uint64_t n = rejected_from(w);
    if (n > 0) (*r.mutable_rejected_by_sender())[WorkerName(w)] = n;
  }
  return r;
}

std::string ServerStats::ToLogLine(const table::TableCounters& exact) const {
  std::string line = "applied " + std::to_string(packets_applied()) +
                     " packets (" + std::to_string(rows_applied()) +
                     " rows), rejected " + std::to_string(packets_rejected());
  std::string senders;
  for (uint32_t w = 0; w < num_workers_; ++w) {
    uint64_t n = rejected_from(w);
    if (n == 0) continue;
    senders += (senders.empty() ? "" : ", ") + WorkerName(w) + ": " +
               std::to_string(n);
  }
  if (!senders.empty()) line += " (" + senders + ")";
  if (lookups_answered() > 0) {
    line += ", answered " + std::to_string(lookups_answered()) + " lookups (" +
            std::to_string(lookup_keys()) + " keys)";
  }
  line += ", exact rows " + std::to_string(exact.rows) + " (evicted " +
          std::to_string(exact.evicted) + ", pending " +
          std::to_string(exact.admission_pending) + ", dropped pushes " +
          std::to_string(exact.dropped_pushes) + ", refused for memory " +
          std::to_string(exact.refused_full) + ")";
  if (exact.demoted > 0 || exact.rows_on_disk > 0) {
    line += ", on disk " + std::to_string(exact.rows_on_disk) + " rows (" +
            std::to_string(exact.demoted) + " moved out, " +
            std::to_string(exact.promoted) + " brought back)";
  }
  return line;
}

}  // namespace ps::server
