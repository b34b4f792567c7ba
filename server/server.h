// Server: one ps_server process, serving one shard of every table.
//
// It owns the xfer Context, the shard's tables (server/shard.h), the inboxes
// and status words (server/inboxes.h), the apply threads
// (server/apply_loop.h) and the control service (server/control_service.h),
// and answers control requests: hello -> ClusterInfo with the descriptors
// of this worker's inbox, the status words and every table's rows; exact
// pulls (and exact pushes from workers built before EXACT pushes went
// through the inboxes as keyed packets); stats; status (ps_ctl status:
// server_status.cc, also answered while starting or stopping); shutdown.
//
//   auto server = Server::Create(options).value();   // allocates, listens
//   server->Start();        // restores (agreed with the other shards), applies
//   server->Run(stats_every_secs);                    // until RequestStop()
//   // Run() has stopped the control service, drained every inbox and logged
//   // the final stats.
//
// The server's clock and barrier words are passive: workers write their
// clocks into shard 0's status words and read them back one-sidedly; the
// server only tells them the mode (ClusterInfo.consistency).
//
// The control service listens from Create on, but until Start() is done
// (the restore agreed by every shard), and again from the moment the server
// stops until its final checkpoint is committed, it answers only the other
// shards' checkpoint questions; workers are told the server is starting or
// stopping.
// With a checkpoint folder the server publishes its control address there
// (server/peer_registry.h) so that the shards can reach each other.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "protocol/ps.pb.h"
#include "server/apply_loop.h"
#include "server/checkpoint/checkpointer.h"
#include "server/control_service.h"
#include "server/inboxes.h"
#include "server/peer_registry.h"
#include "server/server_stats.h"
#include "server/shard.h"

namespace ps::metrics {
class Registry;
}

namespace ps::server {

struct ServerOptions {
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t num_workers = 1;
  // The xfer Context's options (core/context_options.h), which the control
  // listener shares: both listeners bind xfer.listen_host (one address, or
  // 0.0.0.0 / ::) and tell peers xfer.advertise_host (empty: derived,
  // net/advertise.h); both require xfer.secret when listen_host is not a
  // loopback address (core/auth.h), and a peer (worker or shard) silent
  // for xfer.peer_timeout_ms is lost (control calls and hellos have that
  // deadline too). xfer.listen_port is the xfer listener's port (0: any
  // free port). Create names the context and sizes its notification queue.
  xfer::ContextOptions xfer = xfer::ContextOptions::WithPeerTimeout(30000);
  uint16_t port = 0;  // control listener; 0: any free port
  proto::TableConfig tables;
  ApplyOptions apply;
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 2;  // ssp only
  // Control connections at once; 0: 2 per worker, 1 per other shard, and 8
  // for tools.
  uint32_t max_control_connections = 0;
  uint32_t inbox_slots = protocol::kDefaultInboxSlots;
  uint32_t slot_bytes = protocol::kDefaultSlotBytes;
  // The CUDA device the HASHED and DENSE tables live on (server/shard.h);
  // none: host memory.
  std::optional<int> device;
  CheckpointOptions checkpoint;  // server/checkpoint/checkpointer.h
  // Where EXACT tables with when_full: WHEN_FULL_MOVE_TO_DISK keep the rows
  // beyond their memory bound (Shard::Create); scratch, emptied at start.
  DiskTierOptions disk_tier;
  std::string version;  // reported by the status request
  // Tells workers that this server takes EXACT keys in the order its
  // tables file them, as hashes of fixed-width deltas
  // (ClusterInfo.keys_in_hash_order, fixed_hash_deltas), so they sort
  // pushes and large pulls so. false: it answers as a server built before
  // that did, and its workers send keys as such a server takes them (tests
  // of mixed builds; no other use).
  bool keys_in_hash_order = true;
};

// kInvalidArgument naming the option at fault.
Status ValidateServerOptions(const ServerOptions& options);

class Server {
 public:
  // Validates the options, creates the xfer Context, allocates and
  // initializes every table, the inboxes and status words, and starts the
  // control service (for the other shards only, until Start). Logs one line
  // per table.
  static StatusOr<std::unique_ptr<Server>> Create(ServerOptions options);
  ~Server();

  // Restores the shard (--restore_from, agreed with every other shard),
  // starts the apply threads and opens the control service to workers. A
  // failed or cancelled (RequestStop) restore is returned; the server then
  // serves nobody and is destroyed.
  Status Start();
  // "host:port" of the control listener (what workers and --port_file get).
  const std::string& control_address() const;
  // The xfer Context's address (in ClusterInfo).
  std::string xfer_address() const;

  // Makes Run() return; the server then stops within seconds (waits that
  // could last are cancelled; a final checkpoint is still written). A
  // second call also gives up on the final checkpoint's waits. Thread-safe;
  // not async-signal-safe (call it from a signal-handling thread).
  void RequestStop();
  bool stop_requested() const;

  // Blocks until RequestStop(), logging stats every `stats_every_secs`
  // (0: never); then stops the control service, marks the status words
  // "shutting down", drains every inbox and logs the final stats.
  void Run(uint32_t stats_every_secs);

  proto::StatsReply Stats() const;
  std::string StatsLine() const;
  // What the status request answers (server_status.cc).
  proto::ServerStatusReply StatusReport() const;
  // Adds this server's metrics (collectors read at scrape time; see
  // server_metrics.cc) to `registry`. The server must outlive every scrape.
  void AddMetrics(metrics::Registry* registry) const;

  // The parts, for tests that drive them directly.
  Shard* shard() const { return shard_.get(); }
  Inboxes* inboxes() const { return inboxes_.get(); }

  // Answers one control request (what the control service calls).
  proto::ControlReply Handle(const proto::ControlRequest& request,
                             ControlPeer* peer);

 private:
  explicit Server(ServerOptions options);
  table::TableCounters SumTableCounters() const;
  proto::ControlReply Hello(const proto::WorkerHello& hello, ControlPeer* peer);
  Status ExactPush(const proto::ExactPushRequest& r);
  Status ExactPull(const proto::ExactPullRequest& r,
                   proto::ExactPullReply* reply);
  // The table `table_id` if workers reach its rows through the server.
  StatusOr<table::Table*> FindKeyed(uint32_t table_id) const;
  void Drain();
  // The record of the workers' control connections (server_status.cc):
  // a hello on `peer` (worker_id not yet set to `w`), any request of a
  // worker, a closed connection.
  void NoteHello(const ControlPeer& peer, uint32_t w);
  void NoteRequest(const ControlPeer& peer);
  void NoteClose(const ControlPeer& peer);

  const ServerOptions options_;
  std::unique_ptr<xfer::Context> context_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<Inboxes> inboxes_;
  std::unique_ptr<ServerStats> stats_;
  std::unique_ptr<ApplyLoop> apply_;
  std::unique_ptr<ControlService> control_;
  std::unique_ptr<PeerRegistry> peers_;
  std::unique_ptr<Checkpointer> checkpointer_;
  // Whom the control service answers: while starting (restoring) and while
  // stopping (the final checkpoint), the other shards' checkpoint questions
  // only; while serving, everyone.
  enum class Serving { kPeersOnly, kEveryone };
  std::atomic<Serving> serving_{Serving::kPeersOnly};

  // What the status request says of each worker.
  struct WorkerRecord {
    bool said_hello = false;
    uint32_t open_connections = 0;
    std::string address;
    int64_t last_seen_unix_ms = 0;
  };
  const std::chrono::steady_clock::time_point started_ =
      std::chrono::steady_clock::now();
  mutable std::mutex workers_mu_;
  std::vector<WorkerRecord> workers_;  // guarded by workers_mu_, by id

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  int stop_requests_ = 0;  // guarded by mu_; > 0: stop requested
  bool drained_ = false;   // guarded by mu_
};

}  // namespace ps::server
