#include "client/ps_client.h"

#include <algorithm>
#include <map>
#include <thread>

#include "client/device_push.h"
#include "client/exact_path.h"
#include "client/pull_planner.h"
#include "client/push_pipeline.h"
#include "client/push_queue.h"
#include "client/server_group.h"
#include "client/shard_router.h"
#include "client/shared_pool.h"
#include "client/worker_clock.h"
#include "protocol/spec_choices.h"
#include "protocol/table_runtime_config.h"

namespace ps::worker {
namespace {

// One table as the client sees it: its spec, where its keys go and the
// path its pushes and pulls take (exact for EXACT, push/pull otherwise).
struct ClientTable {
  ClientTable(const proto::TableSpec& s,
              const protocol::TableRuntimeConfig& config, ServerGroup& servers,
              const WorkerClock& clock, SharedPool& pool,
              kernels::QuantStats* quant)
      : spec(s), router(spec, servers.size()) {
    if (spec.kind() == proto::EXACT) {
      exact = std::make_unique<ExactPath>(spec, router, servers, clock, pool);
    } else {
      push = std::make_unique<PushPipeline>(spec, config, router, servers,
                                            clock, pool, quant);
      pull = std::make_unique<PullPlanner>(spec, router, servers, pool);
      device =
          std::make_unique<DevicePush>(spec, config, router, servers, clock);
    }
  }
  const proto::TableSpec spec;
  const ShardRouter router;
  std::unique_ptr<ExactPath> exact;
  std::unique_ptr<PushPipeline> push;
  std::unique_ptr<PullPlanner> pull;
  std::unique_ptr<DevicePush> device;
};

}  // namespace

class PsClient::Impl {
 public:
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
  std::unique_ptr<xfer::Context> xfer;
  std::unique_ptr<ServerGroup> servers;
  std::unique_ptr<WorkerClock> clock;
  std::unique_ptr<SharedPool> pool;
  std::map<uint32_t, std::unique_ptr<ClientTable>> tables;
  // PushAsync's pushes; declared last, so that it stops (running what is
  // queued) before anything its pushes use goes.
  PushQueue pushes;

  StatusOr<ClientTable*> Table(uint32_t id, const char* what) {
    auto it = tables.find(id);
    if (it == tables.end()) {
      return InvalidArgument(std::string(what) + ": no table with id " +
                             std::to_string(id));
    }
    return it->second.get();
  }
  StatusOr<ClientTable*> DenseTable(uint32_t id, const char* what) {
    PS_ASSIGN_OR_RETURN(ClientTable * t, Table(id, what));
    if (t->spec.kind() != proto::DENSE) {
      return InvalidArgument(std::string(what) + ": table " + t->spec.name() +
                             " is not DENSE");
    }
    return t;
  }
  // A push whose packets are posted completes when they are in place (in
  // the inboxes it wrote to: InboxWriter::Flush).
  Status Flushed(Status posted) {
    PS_RETURN_IF_ERROR(posted);
    return servers->FlushInboxes();
  }
  // One push of keys and their gradients, complete on return (in the
  // inboxes).
  Status RunPush(ClientTable* t, std::span<const uint64_t> keys,
                 std::span<const float> grads) {
    if (t->exact != nullptr) return Flushed(t->exact->Push(keys, grads));
    return Flushed(t->push->Post(keys, grads));
  }
};

StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const Options& options) {
  if (options.servers.empty()) return InvalidArgument("no servers given");
  if (options.num_workers == 0 || options.worker_id >= options.num_workers) {
    return InvalidArgument("worker id " + std::to_string(options.worker_id) +
                           " is not below the worker count " +
                           std::to_string(options.num_workers));
  }
  if (options.counters != nullptr &&
      options.counters->shards() < options.servers.size()) {
    return InvalidArgument(
        "client counters for " + std::to_string(options.counters->shards()) +
        " shards, not " + std::to_string(options.servers.size()));
  }
  auto impl = std::make_unique<Impl>();
  impl->worker_id = options.worker_id;
  impl->num_workers = options.num_workers;
  xfer::ContextOptions xo = options.xfer;
  xo.name = "worker-" + std::to_string(options.worker_id);
  if (options.counters != nullptr) xo.link_counters = options.counters->link();
  PS_ASSIGN_OR_RETURN(impl->xfer, xfer::Context::Create(xo));
  std::vector<std::unique_ptr<ServerLink>> links;
  for (uint32_t s = 0; s < options.servers.size(); ++s) {
    ServerLink::Options lo;
    lo.address = options.servers[s];
    lo.shard = s;
    lo.num_shards = static_cast<uint32_t>(options.servers.size());
    lo.worker_id = options.worker_id;
    lo.num_workers = options.num_workers;
    lo.timeout_ms = options.xfer.peer_timeout_ms;
    lo.secret = options.xfer.secret;
    if (options.counters != nullptr) lo.counters = options.counters->shard(s);
    PS_ASSIGN_OR_RETURN(auto link, ServerLink::Connect(*impl->xfer, lo));
    links.push_back(std::move(link));
  }
  impl->servers = std::make_unique<ServerGroup>(std::move(links));
  ServerGroup& servers = *impl->servers;
  const proto::ClusterInfo& info0 = servers[0].info();
  WorkerClock::Options co;
  co.worker_id = options.worker_id;
  co.num_workers = options.num_workers;
  co.timeout_ms = options.xfer.peer_timeout_ms;
  PS_ASSIGN_OR_RETURN(co.consistency, protocol::ConsistencyOf(info0));
  co.staleness = info0.staleness();
  impl->clock = std::make_unique<WorkerClock>(co, servers);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  impl->pool = std::make_unique<SharedPool>(static_cast<int>(std::min(hw, 4u)));
  for (const proto::TableSpec& spec : info0.tables()) {
    if (spec.dim() == 0 || spec.capacity() == 0) {
      return InvalidArgument("table " + spec.name() + " has dim or capacity 0");
    }
    PS_ASSIGN_OR_RETURN(protocol::TableRuntimeConfig config,
                        protocol::TableRuntimeConfig::FromSpec(spec));
    impl->tables[spec.id()] = std::make_unique<ClientTable>(
        spec, config, servers, *impl->clock, *impl->pool,
        options.counters != nullptr ? &options.counters->quant() : nullptr);
  }
  // Every server agrees with shard 0 on the tables and holds the rows the
  // shard map assigns it.
  for (uint32_t s = 0; s < servers.size(); ++s) {
    for (const auto& [id, table] : impl->tables) {
      if (table->spec.kind() == proto::EXACT) continue;
      PS_RETURN_IF_ERROR(servers[s].CheckTable(table->spec, table->router));
    }
  }
  PS_RETURN_IF_ERROR(impl->clock->Resume());
  return std::unique_ptr<PsClient>(new PsClient(std::move(impl)));
}

PsClient::PsClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsClient::~PsClient() = default;

const proto::TableSpec* PsClient::table(uint32_t table_id) const {
  auto it = impl_->tables.find(table_id);
  return it == impl_->tables.end() ? nullptr : &it->second->spec;
}
const proto::TableSpec* PsClient::table(const std::string& name) const {
  for (const auto& [id, t] : impl_->tables) {
    if (t->spec.name() == name) return &t->spec;
  }
  return nullptr;
}
uint32_t PsClient::worker_id() const { return impl_->worker_id; }
uint32_t PsClient::num_workers() const { return impl_->num_workers; }
uint32_t PsClient::num_servers() const { return impl_->servers->size(); }

Status PsClient::Push(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<const float> grads) {
  PS_ASSIGN_OR_RETURN(ClientTable * t, impl_->Table(table_id, "Push"));
  // After the pushes queued before it; then on this thread, so that
  // pushes of several threads run in parallel (one table's take turns).
  impl_->pushes.Drain();
  return impl_->RunPush(t, keys, grads);
}

Status PsClient::Pull(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<float> out) {
  return PullAsync(table_id, keys, out).Wait();
}

PendingOp PsClient::PushAsync(uint32_t table_id, std::span<const uint64_t> keys,
                              std::span<const float> grads) {
  StatusOr<ClientTable*> t = impl_->Table(table_id, "Push");
  if (!t.ok()) return PendingOp(t.status());
  Impl* impl = impl_.get();
  return impl->pushes.Queue([impl, table = *t, keys, grads] {
    return impl->RunPush(table, keys, grads);
  });
}

PendingOp PsClient::PullAsync(uint32_t table_id, std::span<const uint64_t> keys,
                              std::span<float> out) {
  StatusOr<ClientTable*> t = impl_->Table(table_id, "Pull");
  if (!t.ok()) return PendingOp(t.status());
  if ((*t)->exact != nullptr) return PendingOp((*t)->exact->Pull(keys, out));
  return (*t)->pull->Start(keys, out);
}

Status PsClient::PushDense(uint32_t table_id, std::span<const float> grads) {
  PS_ASSIGN_OR_RETURN(ClientTable * t,
                      impl_->DenseTable(table_id, "PushDense"));
  impl_->pushes.Drain();
  return impl_->Flushed(t->push->PostWholeTable(grads));
}

Status PsClient::PullDense(uint32_t table_id, std::span<float> out) {
  PS_ASSIGN_OR_RETURN(ClientTable * t,
                      impl_->DenseTable(table_id, "PullDense"));
  return t->pull->StartWholeTable(out).Wait();
}

Status PsClient::PushFromDevice(uint32_t table_id,
                                std::span<const float> device_grad,
                                uint32_t shard,
                                std::vector<uint64_t>* sent_rows) {
  static_assert(kAllShards == DevicePush::kAllShards);
  if (sent_rows != nullptr) sent_rows->clear();
  PS_ASSIGN_OR_RETURN(ClientTable * t,
                      impl_->Table(table_id, "PushFromDevice"));
  if (t->device == nullptr) {
    return InvalidArgument("PushFromDevice: table " + t->spec.name() +
                           " is EXACT, whose rows the server finds by key; "
                           "push its keys with Push");
  }
  impl_->pushes.Drain();
  return impl_->Flushed(t->device->Post(device_grad, shard, sent_rows));
}

Status PsClient::DevicePushAvailable() {
  return ::ps::worker::DevicePushAvailable();
}

Status PsClient::FlushResiduals(uint32_t table_id) {
  PS_ASSIGN_OR_RETURN(ClientTable * t,
                      impl_->Table(table_id, "FlushResiduals"));
  if (t->exact != nullptr) return Status::OK();
  impl_->pushes.Drain();
  return impl_->Flushed(t->push->PostResiduals());
}

Status PsClient::WaitApplied() {
  impl_->pushes.Drain();
  return impl_->servers->WaitApplied();
}

StatusOr<uint64_t> PsClient::Clock() {
  // The step's pushes are in the inboxes before the clock says it ended.
  impl_->pushes.Drain();
  return impl_->clock->Advance();
}

uint64_t PsClient::clock() const { return impl_->clock->current(); }

StatusOr<uint64_t> PsClient::MinClock() { return impl_->clock->MinClock(); }

Status PsClient::Barrier() {
  impl_->pushes.Drain();
  return impl_->clock->Barrier();
}

StatusOr<proto::StatsReply> PsClient::Stats(uint32_t shard) {
  proto::ControlRequest req;
  req.set_stats(true);
  PS_ASSIGN_OR_RETURN(proto::ControlReply reply, CallServer(shard, req));
  return reply.stats();
}

StatusOr<proto::ControlReply> PsClient::CallServer(
    uint32_t shard, const proto::ControlRequest& r) {
  ServerGroup& servers = *impl_->servers;
  if (shard >= servers.size()) {
    return InvalidArgument("no shard " + std::to_string(shard) + " (of " +
                           std::to_string(servers.size()) + ")");
  }
  return servers[shard].Call(r);
}

}  // namespace ps::worker
