#include "worker/ps_client.h"

#include <algorithm>
#include <thread>

#include "protocol/inbox_ring.h"
#include "protocol/spec_choices.h"
#include "worker/client_context.h"
#include "worker/clock.h"
#include "worker/exact_path.h"
#include "worker/pull_path.h"
#include "worker/push_path.h"

namespace ps::worker {

class PsClient::Impl {
 public:
  ClientContext ctx;

  StatusOr<TableState*> Table(uint32_t id, const char* what) {
    auto it = ctx.tables.find(id);
    if (it == ctx.tables.end()) {
      return InvalidArgument(std::string(what) + ": no table with id " +
                             std::to_string(id));
    }
    return it->second.get();
  }
};

namespace {

Status ConnectServer(ClientContext& ctx, const PsClient::Options& options,
                     uint32_t shard, ServerLink* link) {
  const std::string& address = options.servers[shard];
  link->shard = shard;
  link->name = "server " + std::to_string(shard) + " (" + address + ")";
  auto control = protocol::ControlClient::Connect(
      address, {.timeout_ms = options.timeout_ms, .secret = options.secret});
  if (!control.ok()) return control.status().WithContext(link->name);
  link->control.emplace(std::move(control).value());
  proto::ControlRequest hello;
  hello.mutable_hello()->set_worker_id(options.worker_id);
  hello.mutable_hello()->set_num_workers(options.num_workers);
  hello.mutable_hello()->set_name("worker-" +
                                  std::to_string(options.worker_id));
  PS_ASSIGN_OR_RETURN(proto::ControlReply reply, link->Call(hello));
  if (!reply.has_cluster()) {
    return Corruption(link->name + " answered hello without cluster info");
  }
  link->info = reply.cluster();
  PS_RETURN_IF_ERROR(protocol::NormalizeClusterInfo(&link->info)
                         .WithContext(link->name + ": cluster info"));
  const proto::ClusterInfo& info = link->info;
  if (info.shard_id() != shard || info.num_shards() != options.servers.size()) {
    return InvalidArgument(
        link->name + " is shard " + std::to_string(info.shard_id()) + " of " +
        std::to_string(info.num_shards()) +
        ", but the server list makes it shard " + std::to_string(shard) +
        " of " + std::to_string(options.servers.size()));
  }
  if (info.inbox_slots() == 0 ||
      info.slot_bytes() <= protocol::kSlotHeaderBytes + 64 ||
      info.slot_bytes() % 64 != 0) {
    return InvalidArgument(link->name + " announced an unusable inbox (" +
                           std::to_string(info.inbox_slots()) + " slots of " +
                           std::to_string(info.slot_bytes()) + " bytes)");
  }
  auto ep = ctx.xfer->Connect(info.xfer_address());
  if (!ep.ok()) return ep.status().WithContext(link->name + ": xfer connect");
  link->endpoint = std::move(ep).value();
  auto import = [&](const std::string& d,
                    const std::string& what) -> StatusOr<xfer::RemoteRegion> {
    auto r = link->endpoint->Import(d);
    if (!r.ok()) return r.status().WithContext(link->name + ": " + what);
    return r;
  };
  for (const proto::ShardTable& st : info.shard_tables()) {
    PS_ASSIGN_OR_RETURN(
        xfer::RemoteRegion r,
        import(st.rows_region(),
               "rows of table " + std::to_string(st.table_id())));
    link->rows_region[st.table_id()] = r;
  }
  PS_ASSIGN_OR_RETURN(link->status,
                      import(info.status_region(), "status region"));
  PS_ASSIGN_OR_RETURN(xfer::RemoteRegion inbox,
                      import(info.inbox_region(), "inbox region"));
  InboxWriter::Options io;
  io.endpoint = link->endpoint;
  io.inbox = inbox;
  io.status = link->status;
  io.words = protocol::StatusWords{options.num_workers};
  io.worker_id = options.worker_id;
  io.slots = info.inbox_slots();
  io.slot_bytes = info.slot_bytes();
  io.timeout_ms = options.timeout_ms;
  io.server = link->name;
  link->inbox = std::make_unique<InboxWriter>(std::move(io));
  return link->inbox->Start();
}

// Checks that server `shard` agrees with shard 0 on the tables and holds
// the rows the shard map assigns it.
Status CheckShardTables(ClientContext& ctx, uint32_t shard) {
  const ServerLink& link = *ctx.servers[shard];
  for (const auto& [id, table] : ctx.tables) {
    if (table->spec.kind() == proto::EXACT) continue;
    const proto::ShardTable* found = nullptr;
    for (const auto& st : link.info.shard_tables()) {
      if (st.table_id() == id) found = &st;
    }
    if (found == nullptr) {
      return InvalidArgument(link.name + " has no rows of table " +
                             table->spec.name());
    }
    const uint64_t first = table->locator.FirstRow(shard);
    const uint64_t rows = table->locator.RowsOf(shard);
    const uint64_t bytes = rows * table->spec.dim() * sizeof(float);
    if (found->first_row() != first || found->rows() != rows ||
        link.rows_region.at(id).size() < bytes) {
      return InvalidArgument(
          link.name + " holds rows [" + std::to_string(found->first_row()) +
          ", +" + std::to_string(found->rows()) + ") of table " +
          table->spec.name() + " but the shard map says [" +
          std::to_string(first) + ", +" + std::to_string(rows) + ")");
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const Options& options) {
  if (options.servers.empty()) return InvalidArgument("no servers given");
  if (options.num_workers == 0 || options.worker_id >= options.num_workers) {
    return InvalidArgument("worker id " + std::to_string(options.worker_id) +
                           " is not below the worker count " +
                           std::to_string(options.num_workers));
  }
  auto impl = std::make_unique<Impl>();
  ClientContext& ctx = impl->ctx;
  ctx.worker_id = options.worker_id;
  ctx.num_workers = options.num_workers;
  ctx.timeout_ms = options.timeout_ms;
  ctx.words = protocol::StatusWords{options.num_workers};
  xfer::ContextOptions xo;
  xo.name = "worker-" + std::to_string(options.worker_id);
  xo.transport = options.transport;
  xo.peer_timeout_ms = options.timeout_ms;
  xo.secret = options.secret;
  PS_ASSIGN_OR_RETURN(ctx.xfer, xfer::Context::Create(xo));
  for (uint32_t s = 0; s < options.servers.size(); ++s) {
    ctx.servers.push_back(std::make_unique<ServerLink>());
    PS_RETURN_IF_ERROR(
        ConnectServer(ctx, options, s, ctx.servers.back().get()));
  }
  const proto::ClusterInfo& info0 = ctx.servers[0]->info;
  PS_ASSIGN_OR_RETURN(ctx.consistency, protocol::ConsistencyOf(info0));
  ctx.staleness = info0.staleness();
  for (const proto::TableSpec& spec : info0.tables()) {
    if (spec.dim() == 0 || spec.capacity() == 0) {
      return InvalidArgument("table " + spec.name() + " has dim or capacity 0");
    }
    PS_ASSIGN_OR_RETURN(protocol::TableRuntimeConfig config,
                        protocol::TableRuntimeConfig::FromSpec(spec));
    ctx.tables[spec.id()] = std::make_unique<TableState>(spec, ctx.shards());
    ctx.tables[spec.id()]->config = std::move(config);
  }
  for (uint32_t s = 0; s < ctx.shards(); ++s) {
    PS_RETURN_IF_ERROR(CheckShardTables(ctx, s));
  }
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  ctx.pool =
      std::make_unique<kernels::ThreadPool>(static_cast<int>(std::min(hw, 4u)));
  // Continue from the clock this worker had published (a reconnect).
  {
    ServerLink& s0 = *ctx.servers[0];
    uint64_t clock = 0;
    PS_RETURN_IF_ERROR(s0.endpoint->Get(&clock, 8, s0.status,
                                        ctx.words.ClockOffset(ctx.worker_id)));
    ctx.clock.store(clock);
  }
  return std::unique_ptr<PsClient>(new PsClient(std::move(impl)));
}

PsClient::PsClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsClient::~PsClient() = default;

const proto::TableSpec* PsClient::table(uint32_t table_id) const {
  auto it = impl_->ctx.tables.find(table_id);
  return it == impl_->ctx.tables.end() ? nullptr : &it->second->spec;
}
const proto::TableSpec* PsClient::table(const std::string& name) const {
  for (const auto& [id, t] : impl_->ctx.tables) {
    if (t->spec.name() == name) return &t->spec;
  }
  return nullptr;
}
uint32_t PsClient::worker_id() const { return impl_->ctx.worker_id; }
uint32_t PsClient::num_workers() const { return impl_->ctx.num_workers; }
uint32_t PsClient::num_servers() const { return impl_->ctx.shards(); }

Status PsClient::Push(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<const float> grads) {
  PS_ASSIGN_OR_RETURN(TableState * t, impl_->Table(table_id, "Push"));
  if (t->spec.kind() == proto::EXACT) {
    return ExactPush(impl_->ctx, *t, keys, grads);
  }
  return PushRows(impl_->ctx, *t, keys, grads);
}

Status PsClient::Pull(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<float> out) {
  PS_ASSIGN_OR_RETURN(TableState * t, impl_->Table(table_id, "Pull"));
  if (t->spec.kind() == proto::EXACT) {
    return ExactPull(impl_->ctx, *t, keys, out);
  }
  return PullRows(impl_->ctx, *t, keys, out);
}

Status PsClient::PushDense(uint32_t table_id, std::span<const float> grads) {
  PS_ASSIGN_OR_RETURN(TableState * t, impl_->Table(table_id, "PushDense"));
  if (t->spec.kind() != proto::DENSE) {
    return InvalidArgument("PushDense: table " + t->spec.name() +
                           " is not DENSE");
  }
  return PushWholeTable(impl_->ctx, *t, grads);
}

Status PsClient::PullDense(uint32_t table_id, std::span<float> out) {
  PS_ASSIGN_OR_RETURN(TableState * t, impl_->Table(table_id, "PullDense"));
  if (t->spec.kind() != proto::DENSE) {
    return InvalidArgument("PullDense: table " + t->spec.name() +
                           " is not DENSE");
  }
  return PullWholeTable(impl_->ctx, *t, out);
}

std::future<Status> PsClient::PushAsync(uint32_t table_id,
                                        std::span<const uint64_t> keys,
                                        std::span<const float> grads) {
  return std::async(std::launch::async, [this, table_id, keys, grads] {
    return Push(table_id, keys, grads);
  });
}

std::future<Status> PsClient::PullAsync(uint32_t table_id,
                                        std::span<const uint64_t> keys,
                                        std::span<float> out) {
  return std::async(std::launch::async, [this, table_id, keys, out] {
    return Pull(table_id, keys, out);
  });
}

Status PsClient::FlushResiduals(uint32_t table_id) {
  PS_ASSIGN_OR_RETURN(TableState * t, impl_->Table(table_id, "FlushResiduals"));
  if (t->spec.kind() == proto::EXACT) return Status::OK();
  return FlushTableResiduals(impl_->ctx, *t);
}

Status PsClient::WaitApplied() { return WaitAllApplied(impl_->ctx); }

StatusOr<uint64_t> PsClient::Clock() {
  ClientContext& ctx = impl_->ctx;
  const uint64_t next = ctx.clock.load() + 1;
  const bool bsp = ctx.consistency == proto::CONSISTENCY_BSP;
  if (bsp) PS_RETURN_IF_ERROR(WaitAllApplied(ctx));
  PS_RETURN_IF_ERROR(PublishClock(ctx, next));
  ctx.clock.store(next);
  if (bsp) {
    PS_RETURN_IF_ERROR(WaitMinClock(ctx, next));
  } else if (ctx.consistency == proto::CONSISTENCY_SSP) {
    if (next > ctx.staleness) {
      PS_RETURN_IF_ERROR(WaitMinClock(ctx, next - ctx.staleness));
    }
  }
  return next;
}

uint64_t PsClient::clock() const { return impl_->ctx.clock.load(); }

StatusOr<uint64_t> PsClient::MinClock() { return ReadMinClock(impl_->ctx); }

Status PsClient::Barrier() {
  ClientContext& ctx = impl_->ctx;
  const uint64_t next = ctx.clock.load() + 1;
  PS_RETURN_IF_ERROR(WaitAllApplied(ctx));
  PS_RETURN_IF_ERROR(PublishClock(ctx, next));
  ctx.clock.store(next);
  return WaitMinClock(ctx, next);
}

StatusOr<proto::StatsReply> PsClient::Stats(uint32_t shard) {
  proto::ControlRequest req;
  req.set_stats(true);
  PS_ASSIGN_OR_RETURN(proto::ControlReply reply, CallServer(shard, req));
  return reply.stats();
}

StatusOr<proto::ControlReply> PsClient::CallServer(
    uint32_t shard, const proto::ControlRequest& r) {
  ClientContext& ctx = impl_->ctx;
  if (shard >= ctx.shards()) {
    return InvalidArgument("no shard " + std::to_string(shard) + " (of " +
                           std::to_string(ctx.shards()) + ")");
  }
  return ctx.servers[shard]->Call(r);
}

}  // namespace ps::worker
