// What PsClient's parts share: the links to the servers (control channel,
// xfer endpoint, imported regions, inbox writer) and per-table state (key
// locator, push scratch, pull buffers). Owned by PsClient::Impl; the push
// and pull paths take it by reference.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/context.h"
#include "kernels/thread_pool.h"
#include "protocol/control_channel.h"
#include "protocol/ps.pb.h"
#include "protocol/sparse_packet.h"
#include "protocol/status_words.h"
#include "protocol/table_runtime_config.h"
#include "worker/dense_accumulator.h"
#include "worker/huge_array.h"
#include "worker/inbox_writer.h"
#include "worker/key_locator.h"
#include "worker/row_plan.h"

namespace ps::worker {

struct ServerLink {
  uint32_t shard = 0;
  std::string name;  // "server 1 (127.0.0.1:7001)"
  proto::ClusterInfo info;
  std::mutex control_mu;  // one request at a time on the control channel
  std::optional<protocol::ControlClient> control;
  std::shared_ptr<xfer::Endpoint> endpoint;
  std::unordered_map<uint32_t, xfer::RemoteRegion> rows_region;  // by table
  xfer::RemoteRegion status;
  std::unique_ptr<InboxWriter> inbox;

  StatusOr<proto::ControlReply> Call(const proto::ControlRequest& request) {
    std::lock_guard<std::mutex> lock(control_mu);
    return control->Call(request);
  }
};

// Per (table, shard) push state: the dense sums and, for sparsifying
// tables, the residual that error feedback keeps.
struct ShardPushState {
  DenseAccumulator sums;
  std::vector<float> residual;  // empty unless the table sparsifies
  std::vector<uint32_t> rows;
  std::vector<float> values;
  std::vector<uint8_t> encoded;
  std::vector<protocol::EncodedPacket> packets;
};

// Buffers of one pull (reused through TableState::pull_pool).
struct PullScratch {
  HugeArray<float> table;  // whole-table reads: capacity x dim
  std::vector<uint32_t> local_rows;
  std::vector<uint32_t> key_shard;
  std::vector<std::vector<uint64_t>> pairs;  // per shard
  std::vector<uint64_t> sort_scratch;
  std::vector<std::vector<uint32_t>> unique;         // per shard
  std::vector<ReadPlan> plans;                       // per shard
  std::vector<std::vector<float>> buffers;           // per shard
  std::vector<std::vector<xfer::Segment>> segments;  // per shard
};

struct TableState {
  TableState(const proto::TableSpec& s, uint32_t shards)
      : spec(s), locator(s, shards) {}
  proto::TableSpec spec;
  protocol::TableRuntimeConfig config;  // `spec` parsed once
  KeyLocator locator;

  // Push: one push of a table at a time (the sums are per table shard).
  std::mutex push_mu;
  std::vector<ShardPushState> push;  // per shard, sized at first push
  // Sort-path scratch for small pushes.
  std::vector<std::vector<uint64_t>> push_pairs;
  std::vector<uint64_t> push_sort_scratch;
  std::vector<uint32_t> push_local_rows;
  std::vector<uint32_t> push_key_shard;

  // Pull: a pool of scratch sets, so concurrent pulls neither share nor
  // reallocate buffers.
  std::mutex pull_mu;
  std::vector<std::unique_ptr<PullScratch>> pull_pool;
  std::unique_ptr<PullScratch> TakePullScratch() {
    std::lock_guard<std::mutex> lock(pull_mu);
    if (pull_pool.empty()) return std::make_unique<PullScratch>();
    auto s = std::move(pull_pool.back());
    pull_pool.pop_back();
    return s;
  }
  void ReturnPullScratch(std::unique_ptr<PullScratch> s) {
    std::lock_guard<std::mutex> lock(pull_mu);
    pull_pool.push_back(std::move(s));
  }
};

struct ClientContext {
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
  int timeout_ms = 30000;
  std::unique_ptr<xfer::Context> xfer;
  std::vector<std::unique_ptr<ServerLink>> servers;  // by shard
  std::map<uint32_t, std::unique_ptr<TableState>> tables;
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 0;
  protocol::StatusWords words{1};
  // Threads for hashing and scattering; one user at a time (try_lock: a
  // concurrent caller runs on its own thread instead).
  std::unique_ptr<kernels::ThreadPool> pool;
  std::mutex pool_mu;
  std::atomic<uint64_t> clock{0};

  uint32_t shards() const { return static_cast<uint32_t>(servers.size()); }
};

}  // namespace ps::worker
