// PsClient: a worker's handle on the parameter servers. Small on purpose:
//
//   PsClient::Options o;
//   o.worker_id = 0; o.num_workers = 2;
//   o.servers = {"127.0.0.1:7000", "127.0.0.1:7001"};   // shard 0, shard 1
//   auto client = PsClient::Connect(o).value();
//   client->Pull(kEmbeddings, keys, weights);          // one-sided reads
//   ... forward / backward ...
//   client->Push(kEmbeddings, keys, grads);            // into server inboxes
//   client->Clock();                                   // end of step
//
// Pushes are sent in the table's push value type and sparsification (with
// error feedback), split per shard into self-contained packets and written
// one-sidedly into the worker's inbox on each server (credit-based: a full
// inbox makes Push wait); an EXACT table's packets carry keys (fp32 values,
// no sparsification), which the server resolves to rows. Pulls of HASHED
// and DENSE tables read rows straight out of server memory; EXACT tables
// go through the server.
//
// When calls complete: a Push returns once its packets are in the servers'
// inboxes, not once they are applied (a Pull right after it may not see it
// yet); WaitApplied, a bsp Clock or a Barrier waits for that. A Pull
// returns once the rows are in `out`. Each call below says its own.
//
// Consistency (the servers' --consistency): Clock() ends a step. async: it
// returns at once. bsp: it returns once every worker finished the step and
// every push of it is applied. ssp (staleness s): it returns once the slowest
// worker is at most s steps behind.
//
// Thread-safe: a trainer's threads may Push and Pull concurrently (pushes of
// one table take turns); Clock and Barrier are called by one thread per
// worker.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "client/client_counters.h"
#include "client/pending_op.h"
#include "core/context.h"
#include "protocol/ps.pb.h"

namespace ps::worker {

class PsClient {
 public:
  struct Options {
    uint32_t worker_id = 0;
    uint32_t num_workers = 1;
    // Control addresses of the servers, in shard order.
    std::vector<std::string> servers;
    // This worker's xfer Context (core/context_options.h): the transport,
    // its own listener (servers never dial it today; it serves tools), the
    // cluster secret (empty: the servers must have none). A server silent
    // for xfer.peer_timeout_ms is lost: operations fail with kPeerLost (or
    // kTimeout for a control call without reply or keepalive). Connect
    // names the context; link_counters come from `counters` when given.
    xfer::ContextOptions xfer = xfer::ContextOptions::WithPeerTimeout(30000);
    // Monitoring (null: none): credit waits per shard and the quantization
    // error of pushes go there (client_counters.h); it has at least one
    // shard per server and outlives the client.
    ClientCounters* counters = nullptr;
  };

  // Says hello to every server, connects xfer and imports the regions;
  // returns once every server was checked against the shard map and this
  // worker's clock was read back (a reconnect continues from it).
  static StatusOr<std::unique_ptr<PsClient>> Connect(const Options& options);
  // Waits for nothing: wait for pending handles first.
  ~PsClient();

  // The tables the servers serve; nullptr for an unknown id/name.
  const proto::TableSpec* table(uint32_t table_id) const;
  const proto::TableSpec* table(const std::string& name) const;
  uint32_t worker_id() const;
  uint32_t num_workers() const;
  uint32_t num_servers() const;

  // Adds grads (keys.size() x dim floats, row-major) to the keys' rows
  // through the table's optimizer. Duplicate keys are summed first.
  // Returns once the packets are in the servers' inboxes (see above).
  Status Push(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<const float> grads);
  // Reads the keys' rows into out (keys.size() x dim floats); returns once
  // they are there. EXACT keys without a row read as zeros.
  Status Pull(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<float> out);
  // DENSE tables: the whole table (capacity x dim floats); complete as Push
  // and Pull.
  Status PushDense(uint32_t table_id, std::span<const float> grads);
  Status PullDense(uint32_t table_id, std::span<float> out);

  // Gradients in GPU memory (HASHED and DENSE tables): adds device_grad
  // (device memory of the calling thread's current device) to the table's
  // rows, through the table's optimizer, like Push. The gradient is dense
  // and indexed by global row (protocol::ShardMap::ForTable(spec,
  // num_servers())), not by key: every row of the table (capacity x dim
  // floats) for kAllShards, else the rows of `shard` only (RowsOf(shard) x
  // dim, from its first row). Rows are selected, quantized to the table's
  // push value type and packed on the device (client/device_push.h
  // says which rows: without sparsification every nonzero row; no error
  // feedback), then written to the inboxes as Push writes its packets, so
  // steps, Clock and consistency work the same. `sent_rows` (may be null)
  // gets the global rows sent. Completes as Push. kInvalidArgument: no such
  // table, an EXACT table (its rows are found by key on the server; push
  // its keys with Push), a null or wrongly sized gradient, no such shard,
  // memory that is not on the current device. kNotSupported only when this
  // build has no CUDA or no device is usable (a caller may fall back to
  // Push then).
  static constexpr uint32_t kAllShards = UINT32_MAX;
  Status PushFromDevice(uint32_t table_id, std::span<const float> device_grad,
                        uint32_t shard = kAllShards,
                        std::vector<uint64_t>* sent_rows = nullptr);
  // OK when PushFromDevice can run in this build on this machine; else
  // kNotSupported saying why. No server is asked.
  static Status DevicePushAvailable();

  // Asynchronous forms; the handle's Wait() returns when Push / Pull would
  // have, with their Status, and the spans must stay valid until then.
  // PushAsync returns once the push is queued: the client's push thread
  // (client/push_queue.h) runs queued pushes in order (summing, encoding,
  // waiting for inbox credit, posting, flushing the inboxes written), and
  // Push, PushDense, PushFromDevice, FlushResiduals, WaitApplied, Clock and
  // Barrier run after every push queued before them. PullAsync returns once
  // the pull's transfers are posted (the core's non-blocking requests) and
  // does not wait for queued pushes. The keys and gradients of a queued
  // push are read when it runs: leave them unchanged until Wait(). Wait on
  // every handle before the client is destroyed.
  PendingOp PushAsync(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<const float> grads);
  PendingOp PullAsync(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<float> out);

  // Sends what sparsification held back for the table (its residual);
  // returns once those packets are in the inboxes.
  Status FlushResiduals(uint32_t table_id);
  // Returns once every packet this worker pushed has been applied.
  Status WaitApplied();

  // Ends this worker's step (see consistency above); returns the new clock.
  StatusOr<uint64_t> Clock();
  // This worker's clock (its Clock and Barrier calls so far); no wait.
  uint64_t clock() const;
  // The smallest clock of all workers, read now (one Get from shard 0).
  StatusOr<uint64_t> MinClock();
  // Returns once every push of this worker is applied and every worker has
  // called Barrier as often as this one (a Barrier counts as a clock step).
  Status Barrier();

  // Counters of server `shard`; returns once the server answered.
  StatusOr<proto::StatsReply> Stats(uint32_t shard);

  // Sends one control request to server `shard` on this worker's own
  // connection (which said hello as this worker) and returns the reply:
  // for worker-side protocols built on the control channel, such as
  // checkpoint sync (client/checkpoint_sync.h). Completes when the reply
  // arrives; kTimeout when the server sent nothing, not even a keepalive,
  // for timeout_ms.
  StatusOr<proto::ControlReply> CallServer(uint32_t shard,
                                           const proto::ControlRequest& r);

  class Impl;

 private:
  explicit PsClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ps::worker
