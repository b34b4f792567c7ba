#include "serving/lookup_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/access.h"
#include "protocol/control_channel.h"
#include "protocol/lookup_packet.h"
#include "protocol/serving_lookup.h"

namespace ps::serving {

struct LookupService::Session {
  uint64_t id = 0;
  std::string peer;  // the client's control address, for logs
  std::shared_ptr<xfer::MemoryRegion> request;
  std::shared_ptr<xfer::Endpoint> client;
  xfer::RemoteRegion reply;
};

LookupService::LookupService(Options options, TablesSource tables,
                             metrics::Histogram* latency)
    : options_(std::move(options)),
      tables_(std::move(tables)),
      latency_(latency) {}

StatusOr<std::unique_ptr<LookupService>> LookupService::Start(
    Options options, TablesSource tables, metrics::Histogram* latency) {
  if (options.max_keys == 0 || options.threads < 1) {
    return InvalidArgument(
        "a lookup service needs max_keys >= 1 and at "
        "least one thread");
  }
  std::unique_ptr<LookupService> s(
      new LookupService(std::move(options), std::move(tables), latency));
  PS_ASSIGN_OR_RETURN(s->context_, xfer::Context::Create(s->options_.xfer));
  server::ControlService::Options control = s->options_.control;
  LookupService* self = s.get();
  control.on_close = [self](const server::ControlPeer& peer) {
    self->Closed(peer);
  };
  PS_ASSIGN_OR_RETURN(s->control_,
                      server::ControlService::Listen(
                          control, [self](const proto::ControlRequest& r,
                                          server::ControlPeer* peer) {
                            return self->Handle(r, peer);
                          }));
  PS_RETURN_IF_ERROR(s->control_->Start());
  for (int i = 0; i < s->options_.threads; ++i) {
    s->threads_.emplace_back([self] { self->LookupLoop(); });
  }
  return s;
}

LookupService::~LookupService() { Stop(); }

void LookupService::Stop() {
  if (stop_.exchange(true)) return;
  if (control_) control_->Stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  std::lock_guard lock(mu_);
  sessions_.clear();
  by_region_.clear();
}

const std::string& LookupService::control_address() const {
  return control_->address();
}

std::string LookupService::xfer_address() const { return context_->address(); }

proto::ControlReply LookupService::Handle(const proto::ControlRequest& request,
                                          server::ControlPeer* peer) {
  proto::ControlReply reply;
  if (request.request_case() != proto::ControlRequest::kServeHello) {
    protocol::SetControlError(
        InvalidArgument("a serving replica (ps_serve) answers lookup "
                        "clients only (a serve_hello)"),
        &reply);
    return reply;
  }
  auto info = Hello(request.serve_hello(), peer);
  if (!info.ok()) {
    LOG(WARNING) << "lookup client " << peer->address
                 << " refused: " << info.status();
    protocol::SetControlError(info.status(), &reply);
    return reply;
  }
  *reply.mutable_serve_info() = std::move(*info);
  return reply;
}

StatusOr<proto::ServeInfo> LookupService::Hello(const proto::ServeHello& hello,
                                                server::ControlPeer* peer) {
  std::shared_ptr<const ServedTables> tables = tables_();
  if (tables == nullptr) {
    return NotInitialized("this replica serves no checkpoint yet");
  }
  proto::ServeInfo info;
  for (const auto& t : tables->manifest().tables()) *info.add_tables() = t;
  info.set_num_shards(tables->manifest().num_shards());
  for (uint32_t s : tables->shards()) info.add_shards(s);
  info.set_xfer_address(context_->address());
  info.set_max_keys(options_.max_keys);
  info.set_step(tables->checkpoint().step);
  if (hello.reply_region().empty()) return info;

  // Attach: the client's reply region must hold the widest table's rows.
  uint32_t max_dim = 1;
  for (const auto& t : info.tables()) max_dim = std::max(max_dim, t.dim());
  auto session = std::make_shared<Session>();
  session->peer = peer->address;
  PS_ASSIGN_OR_RETURN(session->client,
                      context_->Connect(hello.client_xfer_address()));
  PS_ASSIGN_OR_RETURN(session->reply,
                      session->client->Import(hello.reply_region()));
  const size_t need =
      protocol::ServingReplyRegionBytes(options_.max_keys, max_dim);
  if (session->reply.size() < need ||
      (session->reply.access() & xfer::kRemoteWrite) == 0) {
    return InvalidArgument(
        "the reply region must be writable and hold " + std::to_string(need) +
        " bytes (" + std::to_string(options_.max_keys) + " rows of " +
        std::to_string(max_dim) + " floats and the header), not " +
        std::to_string(session->reply.size()));
  }
  PS_ASSIGN_OR_RETURN(
      session->request,
      context_->Allocate(protocol::ServingRequestRegionBytes(options_.max_keys),
                         xfer::kRemoteWrite | xfer::kNotifyEvents));
  info.set_request_region(session->request->descriptor());
  std::lock_guard lock(mu_);
  if (peer->worker_id >= 0) {  // attached again on this connection
    auto old = sessions_.find(static_cast<uint64_t>(peer->worker_id));
    if (old != sessions_.end()) {
      by_region_.erase(old->second->request->id());
      sessions_.erase(old);
    }
  }
  session->id = next_session_++;
  peer->worker_id = static_cast<int64_t>(session->id);
  sessions_[session->id] = session;
  by_region_[session->request->id()] = session;
  LOG(INFO) << "lookup client " << peer->address << " attached over "
            << xfer::TransportName(session->client->transport());
  return info;
}

void LookupService::Closed(const server::ControlPeer& peer) {
  if (peer.worker_id < 0) return;
  std::lock_guard lock(mu_);
  auto it = sessions_.find(static_cast<uint64_t>(peer.worker_id));
  if (it == sessions_.end()) return;
  by_region_.erase(it->second->request->id());
  sessions_.erase(it);
}

void LookupService::LookupLoop() {
  std::vector<uint64_t> packet;  // 8-byte aligned copies of requests
  std::vector<char> reply;
  xfer::Request sent;  // the last reply
  std::string sent_to;
  // After a lookup, the next is likely near: one thread at a time polls
  // for a while before it sleeps (a sleeping thread's wake-up costs about a
  // lookup's time; more than one spinning would take the cores that the
  // transport's threads need).
  auto last = std::chrono::steady_clock::now() - options_.spin;
  while (!stop_.load()) {
    std::optional<xfer::Notification> n;
    if (std::chrono::steady_clock::now() - last < options_.spin &&
        !spinning_.exchange(true)) {
      while (!stop_.load() &&
             std::chrono::steady_clock::now() - last < options_.spin) {
        if ((n = context_->PollNotification())) break;
        std::this_thread::yield();  // the transport's threads come first
      }
      spinning_.store(false);
      if (!n) continue;
    } else {
      auto waited = context_->WaitNotification(std::chrono::milliseconds(100));
      if (!waited.ok()) continue;
      n = *waited;
    }
    last = std::chrono::steady_clock::now();
    std::shared_ptr<Session> session;
    {
      std::lock_guard lock(mu_);
      auto it = by_region_.find(n->region_id);
      if (it != by_region_.end()) session = it->second;
    }
    ReportFailed(&sent, sent_to);
    if (session) Answer(*session, &packet, &reply, &sent, &sent_to);
  }
}

void LookupService::ReportFailed(xfer::Request* sent,
                                 const std::string& sent_to) {
  Status s;
  if (sent->Test(&s) && !s.ok()) {
    LOG_EVERY_N(WARNING, 100)
        << "lookup reply to " << sent_to << " failed: " << s;
    *sent = xfer::Request();
  }
}

void LookupService::Answer(Session& session, std::vector<uint64_t>* packet,
                           std::vector<char>* reply, xfer::Request* sent,
                           std::string* sent_to) {
  const auto start = std::chrono::steady_clock::now();
  // The packet, copied out first: the client may write the region again.
  const char* region = static_cast<const char*>(session.request->data());
  const size_t room = session.request->size() - protocol::kServingPacketOffset;
  uint32_t key_count;
  std::memcpy(&key_count, region + protocol::kServingPacketOffset + 28,
              sizeof key_count);
  const size_t bytes = std::min<size_t>(
      room, protocol::kLookupPacketHeaderBytes + size_t{key_count} * 8);
  packet->resize((bytes + 7) / 8);
  std::memcpy(packet->data(), region + protocol::kServingPacketOffset, bytes);
  const std::span<const uint8_t> copy(
      reinterpret_cast<const uint8_t*>(packet->data()), bytes);

  protocol::ServingReplyHeader header;
  header.answered = protocol::UncheckedLookupRequest(copy);
  size_t rows_bytes = 0;
  std::string table_name;
  auto lookup = [&]() -> Status {
    PS_ASSIGN_OR_RETURN(protocol::LookupRequest r,
                        protocol::ParseLookupPacket(copy, /*shard_id=*/0));
    std::shared_ptr<const ServedTables> tables = tables_();
    const ps::proto::TableSpec* spec =
        tables ? tables->spec(r.meta.table_id) : nullptr;
    if (spec == nullptr) {
      return NotFound("no table id " + std::to_string(r.meta.table_id));
    }
    table_name = spec->name();
    rows_bytes = r.keys.size() * spec->dim() * sizeof(float);
    if (protocol::kServingReplyHeaderBytes + rows_bytes >
        session.reply.size()) {
      return InvalidArgument(std::to_string(r.keys.size()) +
                             " keys: more than the reply region holds");
    }
    reply->resize(protocol::kServingReplyHeaderBytes + rows_bytes);
    std::span<float> out(
        reinterpret_cast<float*>(reply->data() +
                                 protocol::kServingReplyHeaderBytes),
        rows_bytes / sizeof(float));
    PS_ASSIGN_OR_RETURN(ServedTables::LookupResult result,
                        tables->Lookup(r.meta.table_id, r.keys, out));
    header.step = result.checkpoint.step;
    header.created_unix_ms = result.checkpoint.created_unix_ms;
    header.missing = static_cast<uint32_t>(result.missing);
    std::lock_guard lock(mu_);
    TableCounts& c = counts_[table_name];
    ++c.lookups;
    c.keys += r.keys.size();
    c.missing += result.missing;
    return Status::OK();
  };
  header.status = lookup();
  if (!header.status.ok()) {
    rows_bytes = 0;
    std::lock_guard lock(mu_);
    ++refused_;
  }
  reply->resize(protocol::kServingReplyHeaderBytes + rows_bytes);
  protocol::EncodeServingReplyTail(header, reply->data() + 8);
  if (header.answered == 0) return;  // not even a request number to answer
  // Posted, not waited for (the buffer may be reused once posted): the
  // thread goes back to the next lookup while the reply's acknowledgement
  // comes; a failure is logged when the thread next looks (ReportFailed).
  *sent = session.client->PostPutWithNotify(
      reply->data() + 8, reply->size() - 8, session.reply, 8, session.reply,
      protocol::kServingDoorbellOffset, header.answered);
  *sent_to = session.peer;
  if (latency_ != nullptr && header.status.ok()) {
    latency_->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
}

void LookupService::ReportMetrics(metrics::CollectorSink& sink) const {
  std::lock_guard lock(mu_);
  for (const auto& [name, c] : counts_) {
    const metrics::Labels labels = {{"table", name}};
    sink.Counter("ps_serve_lookups_total", "Lookups answered, by table.",
                 labels, static_cast<double>(c.lookups));
    sink.Counter("ps_serve_lookup_keys_total", "Keys looked up, by table.",
                 labels, static_cast<double>(c.keys));
    sink.Counter("ps_serve_lookup_missing_keys_total",
                 "EXACT keys looked up that had no row (answered as zeros).",
                 labels, static_cast<double>(c.missing));
  }
  sink.Counter("ps_serve_lookups_refused_total",
               "Lookups refused (malformed, unknown table, a key of a shard "
               "not held, ...).",
               {}, static_cast<double>(refused_));
  sink.Gauge("ps_serve_clients", "Lookup clients attached.", {},
             static_cast<double>(sessions_.size()));
}

}  // namespace ps::serving
