#include "server/server.h"

#include <glog/logging.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <filesystem>

#include "checkpoint/checkpoint_root.h"
#include "protocol/control_channel.h"
#include "protocol/spec_choices.h"

namespace ps::server {
namespace {

// The deadline of one question to another shard (PeerRegistry::Ask).
constexpr int kPeerQuestionMs = 1000;

}  // namespace

Status ValidateServerOptions(const ServerOptions& o) {
  if (o.num_shards == 0 || o.num_shards > 4096) {
    return InvalidArgument("--num_shards must be in [1, 4096], not " +
                           std::to_string(o.num_shards));
  }
  if (o.shard_id >= o.num_shards) {
    return InvalidArgument("--shard_id " + std::to_string(o.shard_id) +
                           " must be below --num_shards " +
                           std::to_string(o.num_shards));
  }
  if (o.num_workers == 0 || o.num_workers > 65536) {
    return InvalidArgument("--num_workers must be in [1, 65536], not " +
                           std::to_string(o.num_workers));
  }
  if (protocol::ConsistencyName(o.consistency).empty()) {
    return InvalidArgument("--consistency must be async, bsp or ssp, not " +
                           std::to_string(static_cast<int>(o.consistency)));
  }
  if (o.apply.threads == 0 || o.apply.threads > 256) {
    return InvalidArgument("--apply_threads must be in [1, 256], not " +
                           std::to_string(o.apply.threads));
  }
  if (o.apply.idle.sleep_max_us != 0 &&
      o.apply.idle.sleep_min_us > o.apply.idle.sleep_max_us) {
    return InvalidArgument(
        "--idle_sleep_min_us must not exceed "
        "--idle_sleep_max_us");
  }
  if (o.tables.table_size() == 0) {
    return InvalidArgument("no tables: give --tables a TableConfig file");
  }
  if (o.xfer.peer_timeout_ms < 1000 ||
      o.xfer.peer_timeout_ms > 24 * 3600 * 1000) {
    return InvalidArgument(
        "--timeout_ms must be in [1000, 86400000] (keepalives come every "
        "250 ms), not " +
        std::to_string(o.xfer.peer_timeout_ms));
  }
  PS_RETURN_IF_ERROR(xfer::RequireSecretFor(o.xfer.listen_host, o.xfer.secret,
                                            "--listen_host"));
  return ValidateCheckpointOptions(o.checkpoint);
}

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() {
  if (control_) control_->Stop();
  if (apply_) apply_->StopAndDrain();
}

StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options) {
  PS_RETURN_IF_ERROR(ValidateServerOptions(options));
  // Once, here rather than in the validation: it creates the directory.
  if (!options.checkpoint.dir.empty()) {
    PS_RETURN_IF_ERROR(checkpoint::CheckCheckpointRoot(options.checkpoint.dir)
                           .WithContext("--checkpoint_dir"));
  }
  std::unique_ptr<Server> s(new Server(std::move(options)));
  const ServerOptions& o = s->options_;

  xfer::ContextOptions co = o.xfer;
  co.name = "server-" + std::to_string(o.shard_id);
  // Room for a doorbell ring per packet in flight, twice over (the apply
  // threads drop the rings before each poll; server/inboxes.h).
  co.notification_capacity = std::bit_ceil(
      std::clamp<uint64_t>(2 * uint64_t{o.num_workers} * o.inbox_slots, 4096,
                           xfer::ContextOptions::kMaxNotificationCapacity));
  auto context = xfer::Context::Create(co);
  if (!context.ok()) return context.status().WithContext("xfer context");
  s->context_ = std::move(*context);

  PS_ASSIGN_OR_RETURN(
      s->shard_,
      Shard::Create(
          s->context_.get(), o.tables, o.shard_id, o.num_shards, o.device,
          StepPushes{o.num_workers, o.consistency == proto::CONSISTENCY_BSP},
          o.disk_tier));
  const std::string registry_dir =
      !o.checkpoint.dir.empty() ? o.checkpoint.dir
      : o.checkpoint.restore_from.empty()
          ? std::string()
          : std::filesystem::path(o.checkpoint.restore_from)
                .parent_path()
                .string();
  if (!registry_dir.empty() && o.num_shards > 1) {
    // Each question to a peer has a short deadline; the callers add up the
    // silence to --timeout_ms, and a stop does not wait for a long one.
    s->peers_ = std::make_unique<PeerRegistry>(
        registry_dir, o.shard_id, o.num_shards,
        protocol::ControlClient::Options{
            .timeout_ms = std::min(o.xfer.peer_timeout_ms, kPeerQuestionMs),
            .secret = o.xfer.secret});
  }
  s->checkpointer_ = std::make_unique<Checkpointer>(
      o.checkpoint, s->shard_.get(), s->peers_.get(), s->context_->instance());
  // Lookup replies only where a table needs them (server/inboxes.h).
  bool lookups = false;
  for (const auto& t : s->shard_->tables()) {
    lookups |= t->table().access() == table::RowAccess::kThroughServer;
  }
  PS_ASSIGN_OR_RETURN(s->inboxes_,
                      Inboxes::Create(s->context_.get(), o.num_workers,
                                      o.inbox_slots, o.slot_bytes, lookups));
  s->stats_ = std::make_unique<ServerStats>(o.num_workers);
  s->workers_.resize(o.num_workers);
  s->apply_ = std::make_unique<ApplyLoop>(s->shard_.get(), s->inboxes_.get(),
                                          s->stats_.get(), o.apply);
  Server* raw = s.get();
  ControlService::Options cs;
  cs.host = o.xfer.listen_host;
  cs.advertise_host = o.xfer.advertise_host;
  cs.port = o.port;
  cs.secret = o.xfer.secret;
  cs.timeout_ms = o.xfer.peer_timeout_ms;
  cs.on_close = [raw](const ControlPeer& peer) { raw->NoteClose(peer); };
  cs.max_connections = o.max_control_connections != 0
                           ? o.max_control_connections
                           : 2 * o.num_workers + o.num_shards + 8;
  PS_ASSIGN_OR_RETURN(s->control_, ControlService::Listen(
                                       cs, [raw](const proto::ControlRequest& r,
                                                 ControlPeer* peer) {
                                         return raw->Handle(r, peer);
                                       }));
  PS_RETURN_IF_ERROR(s->control_->Start());
  if (s->peers_ != nullptr) {
    PS_RETURN_IF_ERROR(
        s->peers_->Publish(s->control_->address(), s->context_->instance())
            .WithContext("publishing this server's address"));
  }
  for (const auto& t : s->shard_->tables()) LOG(INFO) << t->Describe();
  LOG(INFO) << "shard " << o.shard_id << " of " << o.num_shards << ": "
            << o.num_workers << " workers x " << o.inbox_slots
            << " inbox slots of " << o.slot_bytes << " bytes, "
            << s->apply_->threads() << " apply thread(s), consistency "
            << protocol::ConsistencyName(o.consistency)
            << (o.consistency == proto::CONSISTENCY_SSP
                    ? " (staleness " + std::to_string(o.staleness) + ")"
                    : std::string())
            << "; control " << s->control_->address() << ", xfer "
            << s->context_->address() << " (max " << cs.max_connections
            << " control connections, timeout " << o.xfer.peer_timeout_ms
            << " ms, "
            << (o.xfer.secret.empty() ? "no cluster secret" : "cluster secret")
            << ")";
  return s;
}

Status Server::Start() {
  PS_RETURN_IF_ERROR(checkpointer_->Restore());
  apply_->Start();
  serving_.store(Serving::kEveryone, std::memory_order_release);
  return Status::OK();
}

const std::string& Server::control_address() const {
  return control_->address();
}

std::string Server::xfer_address() const { return context_->address(); }

void Server::RequestStop() {
  int requests;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests = ++stop_requests_;
    stop_cv_.notify_all();
  }
  // Whatever waits on other shards or on the disk's previous write gives
  // up now, so that the stop takes seconds, not --timeout_ms or longer.
  if (requests == 1) {
    checkpointer_->BeginStop();
  } else {
    LOG(WARNING) << "stop requested again: giving up the final checkpoint's "
                    "waits";
    checkpointer_->Abort();
  }
}

bool Server::stop_requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_requests_ > 0;
}

void Server::Run(uint32_t stats_every_secs) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (stop_requests_ == 0) {
      if (stats_every_secs == 0) {
        stop_cv_.wait(lock);
        continue;
      }
      if (!stop_cv_.wait_for(lock, std::chrono::seconds(stats_every_secs),
                             [this] { return stop_requests_ > 0; })) {
        lock.unlock();
        LOG(INFO) << "stats: " << StatsLine();
        lock.lock();
      }
    }
  }
  Drain();
}

void Server::Drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (drained_) return;
    drained_ = true;
  }
  LOG(INFO) << "stopping: no more worker requests; draining the inboxes";
  // Workers are refused from here on, but the other shards may still ask
  // how this shard's part of a checkpoint stands (shard 0 waits for the
  // final one): the control service stops last.
  serving_.store(Serving::kPeersOnly, std::memory_order_release);
  checkpointer_->BeginStop();
  inboxes_->SetShutdown();
  apply_->StopAndDrain();
  checkpointer_->Finish();
  control_->Stop();
  LOG(INFO) << "final stats: " << StatsLine();
}

table::TableCounters Server::SumTableCounters() const {
  table::TableCounters sum;
  for (const auto& t : shard_->tables()) sum += t->table().counters();
  return sum;
}

proto::StatsReply Server::Stats() const {
  return stats_->ToProto(SumTableCounters());
}

std::string Server::StatsLine() const {
  return stats_->ToLogLine(SumTableCounters());
}

proto::ControlReply Server::Handle(const proto::ControlRequest& request,
                                   ControlPeer* peer) {
  proto::ControlReply reply;
  Status s;
  NoteRequest(*peer);
  // A query of how this server stands: answered while starting and
  // stopping too.
  if (request.has_status()) {
    *reply.mutable_status() = StatusReport();
    return reply;
  }
  if (serving_.load(std::memory_order_acquire) == Serving::kPeersOnly) {
    const bool peer_question =
        request.has_checkpoint() &&
        (request.checkpoint().action() == proto::CheckpointRequest::PART ||
         request.checkpoint().action() == proto::CheckpointRequest::RESTORE);
    if (!peer_question) {
      protocol::SetControlError(
          NotInitialized(
              "server shard " + std::to_string(options_.shard_id) +
              (stop_requested()
                   ? " is stopping"
                   : " is still starting (restoring its checkpoint); try "
                     "again once its --port_file is written")),
          &reply);
      return reply;
    }
  }
  switch (request.request_case()) {
    case proto::ControlRequest::kHello:
      return Hello(request.hello(), peer);
    case proto::ControlRequest::kExactPush:
      s = ExactPush(request.exact_push());
      break;
    case proto::ControlRequest::kExactPull:
      s = ExactPull(request.exact_pull(), reply.mutable_exact_pull());
      break;
    case proto::ControlRequest::kStats:
      *reply.mutable_stats() = Stats();
      break;
    case proto::ControlRequest::kCheckpoint: {
      auto r = checkpointer_->Handle(request.checkpoint(), peer->worker_id);
      if (r.ok()) {
        *reply.mutable_checkpoint() = std::move(*r);
      } else {
        s = r.status();
      }
      break;
    }
    case proto::ControlRequest::kShutdown:
      LOG(INFO) << "shutdown requested by "
                << (peer->worker_id >= 0 ? WorkerName(peer->worker_id)
                                         : peer->address);
      RequestStop();
      break;
    case proto::ControlRequest::kServeHello:
      s = InvalidArgument(
          "this is a training server (ps_server); lookups go to a serving "
          "replica (ps_serve)");
      break;
    default:
      s = InvalidArgument("empty or unknown control request");
      break;
  }
  if (!s.ok()) {
    LOG_EVERY_N(WARNING, 100)
        << "control request from " << peer->address << " refused: " << s;
    protocol::SetControlError(s, &reply);
  }
  return reply;
}

proto::ControlReply Server::Hello(const proto::WorkerHello& hello,
                                  ControlPeer* peer) {
  proto::ControlReply reply;
  const uint32_t w = hello.worker_id();
  if (w >= options_.num_workers ||
      (hello.num_workers() != 0 &&
       hello.num_workers() != options_.num_workers)) {
    std::string why = "hello from worker " + std::to_string(w) + " of " +
                      std::to_string(hello.num_workers()) +
                      " workers, but this server serves " +
                      std::to_string(options_.num_workers) + " workers";
    LOG(WARNING) << peer->address << ": " << why;
    protocol::SetControlError(InvalidArgument(why), &reply);
    return reply;
  }
  NoteHello(*peer, w);
  peer->worker_id = w;
  LOG(INFO) << WorkerName(w)
            << (hello.name().empty() ? "" : " (" + hello.name() + ")")
            << " joined from " << peer->address << "; its inbox head is "
            << inboxes_->Head(w);
  proto::ClusterInfo* info = reply.mutable_cluster();
  info->set_shard_id(options_.shard_id);
  info->set_num_shards(options_.num_shards);
  info->set_xfer_address(context_->address());
  *info->mutable_tables() = shard_->config().table();
  for (const auto& t : shard_->tables()) {
    if (t->table().access() != table::RowAccess::kRegion) continue;
    proto::ShardTable* st = info->add_shard_tables();
    st->set_table_id(t->id());
    st->set_first_row(t->first_row());
    st->set_rows(t->rows());
    st->set_rows_region(t->rows_region()->descriptor());
  }
  info->set_inbox_region(inboxes_->inbox_region(w)->descriptor());
  info->set_inbox_slots(inboxes_->slots());
  info->set_slot_bytes(inboxes_->slot_bytes());
  info->set_status_region(inboxes_->status_region()->descriptor());
  if (const xfer::MemoryRegion* reply = inboxes_->reply_region(w)) {
    info->set_lookup_reply_region(reply->descriptor());
  }
  info->set_keys_in_hash_order(options_.keys_in_hash_order);
  info->set_fixed_hash_deltas(options_.keys_in_hash_order);
  // Both spellings: workers of this build read the enum, workers and tools
  // built before it the string.
  info->set_consistency_mode(options_.consistency);
  info->set_consistency(
      std::string(protocol::ConsistencyName(options_.consistency)));
  info->set_staleness(options_.staleness);
  return reply;
}

StatusOr<table::Table*> Server::FindKeyed(uint32_t table_id) const {
  TableShard* t = shard_->Find(table_id);
  if (t == nullptr) {
    return NotFound("unknown table id " + std::to_string(table_id));
  }
  if (t->table().access() != table::RowAccess::kThroughServer) {
    return InvalidArgument("table " + t->spec().name() + " (id " +
                           std::to_string(table_id) +
                           ") is not EXACT: push into the inbox and pull "
                           "its rows one-sidedly");
  }
  return &t->table();
}

Status Server::ExactPush(const proto::ExactPushRequest& r) {
  PS_ASSIGN_OR_RETURN(table::Table * t, FindKeyed(r.table_id()));
  const std::span<const uint64_t> keys(r.keys().data(), r.keys_size());
  PS_RETURN_IF_ERROR(shard_->CheckKeysAreMine(t->spec(), keys));
  return t->ApplyKeys(
      r.step(), keys,
      std::span<const float>(r.values().data(), r.values_size()));
}

Status Server::ExactPull(const proto::ExactPullRequest& r,
                         proto::ExactPullReply* reply) {
  PS_ASSIGN_OR_RETURN(table::Table * t, FindKeyed(r.table_id()));
  const size_t n = r.keys_size();
  constexpr uint64_t kMaxReplyFloats = 32u << 20;  // under the message limit
  if (uint64_t{n} * t->spec().dim() > kMaxReplyFloats) {
    return InvalidArgument("pull of " + std::to_string(n) + " keys x dim " +
                           std::to_string(t->spec().dim()) +
                           " exceeds the reply limit; split it");
  }
  reply->mutable_values()->Resize(static_cast<int>(n * t->spec().dim()), 0.0f);
  std::unique_ptr<bool[]> present(new bool[n]);
  PS_RETURN_IF_ERROR(
      t->ReadKeys(std::span<const uint64_t>(r.keys().data(), r.keys_size()),
                  std::span<float>(reply->mutable_values()->mutable_data(),
                                   reply->values_size()),
                  std::span<bool>(present.get(), n)));
  reply->mutable_present()->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) reply->add_present(present[i]);
  return Status::OK();
}

}  // namespace ps::server
