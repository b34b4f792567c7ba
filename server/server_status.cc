// Server: the status request (what ps_ctl status shows of one server) and
// the record of which workers have a control connection open that it
// reports. The record is guarded by workers_mu_; everything else read here
// is atomic or locked by its owner, so StatusReport may run on any control
// connection's thread while the server trains, starts or stops.
#include <chrono>

#include "checkpoint/layout.h"
#include "server/server.h"

namespace ps::server {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Server::NoteHello(const ControlPeer& peer, uint32_t w) {
  std::lock_guard<std::mutex> lock(workers_mu_);
  if (peer.worker_id == static_cast<int64_t>(w)) return;  // a second hello
  if (peer.worker_id >= 0 &&
      static_cast<uint64_t>(peer.worker_id) < workers_.size()) {
    WorkerRecord& old = workers_[peer.worker_id];
    if (old.open_connections > 0) --old.open_connections;
  }
  WorkerRecord& r = workers_[w];
  r.said_hello = true;
  ++r.open_connections;
  r.address = peer.address;
  r.last_seen_unix_ms = NowUnixMs();
}

void Server::NoteRequest(const ControlPeer& peer) {
  if (peer.worker_id < 0) return;
  std::lock_guard<std::mutex> lock(workers_mu_);
  if (static_cast<uint64_t>(peer.worker_id) < workers_.size()) {
    workers_[peer.worker_id].last_seen_unix_ms = NowUnixMs();
  }
}

void Server::NoteClose(const ControlPeer& peer) {
  if (peer.worker_id < 0) return;
  std::lock_guard<std::mutex> lock(workers_mu_);
  if (static_cast<uint64_t>(peer.worker_id) < workers_.size()) {
    WorkerRecord& r = workers_[peer.worker_id];
    if (r.open_connections > 0) --r.open_connections;
  }
}

proto::ServerStatusReply Server::StatusReport() const {
  proto::ServerStatusReply r;
  const ServerOptions& o = options_;
  r.set_shard_id(o.shard_id);
  r.set_num_shards(o.num_shards);
  r.set_num_workers(o.num_workers);
  r.set_control_address(control_->address());
  r.set_xfer_address(context_->address());
  if (stop_requested()) {
    r.set_state(proto::ServerStatusReply::STOPPING);
  } else if (serving_.load(std::memory_order_acquire) == Serving::kEveryone) {
    r.set_state(proto::ServerStatusReply::SERVING);
  } else {
    r.set_state(proto::ServerStatusReply::STARTING);
  }
  r.set_consistency(o.consistency);
  r.set_staleness(o.staleness);
  r.set_uptime_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started_)
                      .count());
  r.set_instance(context_->instance());
  r.set_version(o.version);
  r.set_inbox_slots(inboxes_->slots());
  *r.mutable_stats() = Stats();
  std::vector<WorkerRecord> records;
  {
    std::lock_guard<std::mutex> lock(workers_mu_);
    records = workers_;
  }
  for (uint32_t w = 0; w < o.num_workers; ++w) {
    const WorkerRecord& rec = records[w];
    proto::WorkerStatus* ws = r.add_workers();
    ws->set_worker_id(w);
    ws->set_state(rec.open_connections > 0 ? proto::WorkerStatus::CONNECTED
                  : rec.said_hello         ? proto::WorkerStatus::GONE
                                           : proto::WorkerStatus::NEVER);
    ws->set_address(rec.address);
    ws->set_last_seen_unix_ms(rec.last_seen_unix_ms);
    // The clocks live in shard 0's status words (client/
    // worker_clock.h); the other shards' words stay 0.
    if (o.shard_id == 0) ws->set_clock(inboxes_->Clock(w));
    ws->set_inbox_applied(inboxes_->Head(w));
    ws->set_inbox_pending(inboxes_->Pending(w));
    ws->set_packets_rejected(stats_->rejected_from(w));
  }
  const std::string& dir = o.checkpoint.dir;
  r.set_checkpoint_dir(dir);
  const Checkpointer::Progress progress = checkpointer_->progress();
  r.set_last_cut_step(progress.last_cut_step);
  r.set_restored_step(progress.restored_step);
  if (!dir.empty()) {
    auto list = checkpoint::ListCheckpoints(dir);
    if (list.ok()) {
      for (const checkpoint::CheckpointInfo& c : *list) {
        if (c.complete) r.set_newest_complete_step(c.step);
      }
    }
  }
  return r;
}

}  // namespace ps::server
