// Server::AddMetrics: what ps_server exports on --metrics_port. Collectors
// only: every number is read at scrape time from the counters the server
// keeps anyway (ServerStats, the tables, the inboxes' words, the apply
// loop, the checkpointer), so serving metrics adds nothing to the apply
// path. Scrapes run on the exporter's threads, concurrently with
// everything else: every value read here is an atomic or a word of shared
// memory read with an atomic load.
#include <string>

#include "metrics/registry.h"
#include "protocol/inbox_slot.h"
#include "server/server.h"

namespace ps::server {

void Server::AddMetrics(metrics::Registry* registry) const {
  const std::string shard = std::to_string(options_.shard_id);
  registry->AddCollector([this, shard](metrics::CollectorSink& sink) {
    const ServerStats& st = *stats_;
    for (uint32_t w = 0; w < st.num_workers(); ++w) {
      const metrics::Labels l = {{"shard", shard}, {"worker", WorkerName(w)}};
      sink.Counter("ps_server_packets_applied_total",
                   "Packets applied from the inbox of a worker.", l,
                   static_cast<double>(st.packets_applied_from(w)));
      sink.Counter("ps_server_rows_applied_total",
                   "Rows applied from the inbox of a worker.", l,
                   static_cast<double>(st.rows_applied_from(w)));
      sink.Counter("ps_server_push_bytes_total",
                   "Bytes of packets applied from the inbox of a worker.", l,
                   static_cast<double>(st.bytes_applied_from(w)));
      for (int r = 0; r < kNumRejectReasons; ++r) {
        const auto reason = static_cast<RejectReason>(r);
        metrics::Labels lr = l;
        lr.emplace_back("reason", RejectReasonName(reason));
        sink.Counter("ps_server_packets_rejected_total",
                     "Packets rejected from the inbox of a worker, by reason "
                     "(slot, header, table, payload, apply).",
                     lr, static_cast<double>(st.rejected_from(w, reason)));
      }
      // Complete packets waiting after the head, i.e. not yet applied.
      const uint64_t head = inboxes_->Head(w);
      uint64_t waiting = 0;
      while (waiting < inboxes_->slots()) {
        const uint64_t n = head + 1 + waiting;
        if (protocol::InboxSlotHeader::Read(inboxes_->Slot(w, n), n).sequence !=
            n) {
          break;
        }
        ++waiting;
      }
      sink.Gauge("ps_server_inbox_packets",
                 "Complete packets in the inbox of a worker, not yet "
                 "applied.",
                 l, static_cast<double>(waiting));
      sink.Counter("ps_server_inbox_consumed_packets_total",
                   "Packets consumed (applied or rejected) from the inbox of "
                   "a worker: its head.",
                   l, static_cast<double>(head));
    }
    sink.Gauge("ps_server_inbox_slots", "Slots of each worker's inbox.",
               {{"shard", shard}}, inboxes_->slots());
    sink.Counter("ps_server_lookups_total",
                 "Lookup packets (pulls of EXACT tables) answered.",
                 {{"shard", shard}},
                 static_cast<double>(st.lookups_answered()));
    sink.Counter("ps_server_lookup_keys_total",
                 "Keys read by the lookups answered.", {{"shard", shard}},
                 static_cast<double>(st.lookup_keys()));
    for (uint32_t t = 0; t < apply_->threads(); ++t) {
      sink.Counter("ps_server_apply_busy_seconds_total",
                   "Time an apply thread spent applying packets, in seconds.",
                   {{"shard", shard}, {"thread", std::to_string(t)}},
                   apply_->BusySeconds(t));
    }
    for (const auto& table : shard_->tables()) {
      const metrics::Labels l = {{"shard", shard},
                                 {"table", table->spec().name()}};
      if (table->table().access() == table::RowAccess::kThroughServer) {
        const table::TableCounters c = table->table().counters();
        sink.Gauge("ps_server_exact_rows",
                   "Keys of an EXACT table holding a row.", l,
                   static_cast<double>(c.rows));
        sink.Counter("ps_server_exact_evictions_total",
                     "Rows of an EXACT table freed (by age, or for room).", l,
                     static_cast<double>(c.evicted));
        sink.Gauge("ps_server_exact_admission_pending",
                   "Keys of an EXACT table pushed but not yet admitted.", l,
                   static_cast<double>(c.admission_pending));
        sink.Counter("ps_server_exact_dropped_pushes_total",
                     "Key pushes to an EXACT table not applied (key not "
                     "admitted).",
                     l, static_cast<double>(c.dropped_pushes));
        sink.Counter("ps_server_exact_refused_admissions_total",
                     "Admissions to an EXACT table refused: shard at "
                     "capacity.",
                     l, static_cast<double>(c.refused_full));
        if (table->spec().when_full() == proto::WHEN_FULL_MOVE_TO_DISK) {
          sink.Gauge("ps_server_exact_rows_on_disk",
                     "Keys of an EXACT table whose row is in its disk tier.", l,
                     static_cast<double>(c.rows_on_disk));
          sink.Counter("ps_server_exact_demotions_total",
                       "Rows of an EXACT table moved to its disk tier to "
                       "make room in memory.",
                       l, static_cast<double>(c.demoted));
          sink.Counter("ps_server_exact_promotions_total",
                       "Rows of an EXACT table brought back from its disk "
                       "tier by a push or a pull.",
                       l, static_cast<double>(c.promoted));
          sink.Counter("ps_server_exact_disk_written_bytes_total",
                       "Bytes of rows an EXACT table wrote to its disk tier.",
                       l, static_cast<double>(c.disk_bytes_written));
          sink.Counter("ps_server_exact_disk_read_bytes_total",
                       "Bytes of rows an EXACT table read from its disk tier "
                       "(pushes and pulls).",
                       l, static_cast<double>(c.disk_bytes_read));
          sink.Counter("ps_server_exact_memory_hits_total",
                       "Keys pulled or pushed whose row an EXACT table with "
                       "a disk tier found in memory.",
                       l, static_cast<double>(c.memory_hits));
          sink.Counter("ps_server_exact_disk_hits_total",
                       "Keys pulled or pushed whose row an EXACT table found "
                       "in its disk tier (read from disk: the misses of its "
                       "memory).",
                       l, static_cast<double>(c.disk_hits));
        }
        continue;
      }
      sink.Counter("ps_server_table_rows_applied_total",
                   "Rows of a table applied from the inboxes.", l,
                   static_cast<double>(table->rows_applied()));
      sink.Counter("ps_server_table_packets_applied_total",
                   "Packets of a table applied from the inboxes.", l,
                   static_cast<double>(table->packets_applied()));
      sink.Gauge("ps_server_table_rows", "Rows of a table this shard holds.", l,
                 static_cast<double>(table->rows()));
    }
    const xfer::LinkStats link = context_->link_stats();
    sink.Counter("ps_server_xfer_sessions_resumed_total",
                 "Broken tcp connections of workers re-established to this "
                 "server (their transfers completed once).",
                 {{"shard", shard}}, static_cast<double>(link.resumed));
    const Checkpointer::PartStats& ck = checkpointer_->part_stats();
    constexpr auto kRelaxed = std::memory_order_relaxed;
    const metrics::Labels l = {{"shard", shard}};
    sink.Counter("ps_server_checkpoint_parts_written_total",
                 "Checkpoint parts this shard wrote.", l,
                 static_cast<double>(ck.written.load(kRelaxed)));
    sink.Counter("ps_server_checkpoint_parts_failed_total",
                 "Checkpoint parts this shard failed to write.", l,
                 static_cast<double>(ck.failed.load(kRelaxed)));
    sink.Gauge("ps_server_checkpoint_last_step",
               "Step of the last checkpoint part this shard wrote.", l,
               static_cast<double>(ck.last_step.load(kRelaxed)));
    sink.Gauge("ps_server_checkpoint_last_size_bytes",
               "Size of the last checkpoint part this shard wrote, in bytes.",
               l, static_cast<double>(ck.last_bytes.load(kRelaxed)));
    sink.Gauge("ps_server_checkpoint_last_pause_seconds",
               "Pause of the applies for the last cut, in seconds.", l,
               ck.last_pause_seconds.load(kRelaxed));
    sink.Gauge("ps_server_checkpoint_last_write_seconds",
               "Write time of the last checkpoint part, in seconds.", l,
               ck.last_write_seconds.load(kRelaxed));
    // The times only once there is one: a 0 would read as a checkpoint
    // 55 years old, where "no data" says what is true.
    if (const double t = ck.last_time_seconds.load(kRelaxed); t > 0) {
      sink.Gauge("ps_server_checkpoint_last_time_seconds",
                 "When this shard wrote its last checkpoint part, in Unix "
                 "seconds.",
                 l, t);
    }
    if (const double t = ck.last_complete_time_seconds.load(kRelaxed); t > 0) {
      sink.Gauge("ps_server_checkpoint_last_complete_time_seconds",
                 "When the last complete checkpoint was committed, in Unix "
                 "seconds (shard 0 commits).",
                 l, t);
    }
  });
}

}  // namespace ps::server
