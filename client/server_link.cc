#include "client/server_link.h"

#include "protocol/inbox_ring.h"
#include "protocol/spec_choices.h"

namespace ps::worker {

StatusOr<std::unique_ptr<ServerLink>> ServerLink::Connect(
    xfer::Context& xfer, const Options& options) {
  std::unique_ptr<ServerLink> link(new ServerLink());
  PS_RETURN_IF_ERROR(link->Open(xfer, options));
  return link;
}

Status ServerLink::Open(xfer::Context& xfer, const Options& options) {
  shard_ = options.shard;
  name_ =
      "server " + std::to_string(options.shard) + " (" + options.address + ")";
  proto::ControlRequest hello;
  hello.mutable_hello()->set_worker_id(options.worker_id);
  hello.mutable_hello()->set_num_workers(options.num_workers);
  hello.mutable_hello()->set_name("worker-" +
                                  std::to_string(options.worker_id));
  auto control = protocol::ControlClient::Connect(
      options.address,
      {.timeout_ms = options.timeout_ms, .secret = options.secret});
  if (!control.ok()) return control.status().WithContext(name_);
  control_.emplace(std::move(control).value());
  control_->EnableReconnect(hello);  // a new connection says hello first
  PS_ASSIGN_OR_RETURN(proto::ControlReply reply, Call(hello));
  if (!reply.has_cluster()) {
    return Corruption(name_ + " answered hello without cluster info");
  }
  info_ = reply.cluster();
  PS_RETURN_IF_ERROR(protocol::NormalizeClusterInfo(&info_).WithContext(
      name_ + ": cluster info"));
  if (info_.shard_id() != options.shard ||
      info_.num_shards() != options.num_shards) {
    return InvalidArgument(name_ + " is shard " +
                           std::to_string(info_.shard_id()) + " of " +
                           std::to_string(info_.num_shards()) +
                           ", but the server list makes it shard " +
                           std::to_string(options.shard) + " of " +
                           std::to_string(options.num_shards));
  }
  if (info_.inbox_slots() == 0 ||
      info_.slot_bytes() <= protocol::kSlotHeaderBytes + 64 ||
      info_.slot_bytes() % 64 != 0) {
    return InvalidArgument(name_ + " announced an unusable inbox (" +
                           std::to_string(info_.inbox_slots()) + " slots of " +
                           std::to_string(info_.slot_bytes()) + " bytes)");
  }
  auto ep = xfer.Connect(info_.xfer_address());
  if (!ep.ok()) return ep.status().WithContext(name_ + ": xfer connect");
  endpoint_ = std::move(ep).value();
  auto import = [&](const std::string& d,
                    const std::string& what) -> StatusOr<xfer::RemoteRegion> {
    auto r = endpoint_->Import(d);
    if (!r.ok()) return r.status().WithContext(name_ + ": " + what);
    return r;
  };
  for (const proto::ShardTable& st : info_.shard_tables()) {
    PS_ASSIGN_OR_RETURN(
        xfer::RemoteRegion r,
        import(st.rows_region(),
               "rows of table " + std::to_string(st.table_id())));
    rows_[st.table_id()] = r;
  }
  PS_ASSIGN_OR_RETURN(status_, import(info_.status_region(), "status region"));
  PS_ASSIGN_OR_RETURN(xfer::RemoteRegion inbox,
                      import(info_.inbox_region(), "inbox region"));
  InboxWriter::Options io;
  io.endpoint = endpoint_;
  io.inbox = inbox;
  io.status = status_;
  io.words = protocol::StatusWords{options.num_workers};
  io.worker_id = options.worker_id;
  io.slots = info_.inbox_slots();
  io.slot_bytes = info_.slot_bytes();
  io.timeout_ms = options.timeout_ms;
  io.server = name_;
  io.counters = options.counters;
  inbox_ = std::make_unique<InboxWriter>(std::move(io));
  PS_RETURN_IF_ERROR(inbox_->Start());
  if (info_.lookup_reply_region().empty()) return Status::OK();
  LookupChannel::Options lo;
  lo.endpoint = endpoint_;
  PS_ASSIGN_OR_RETURN(
      lo.reply, import(info_.lookup_reply_region(), "lookup reply region"));
  lo.inbox = inbox_.get();
  lo.worker_id = options.worker_id;
  lo.shard = shard_;
  lo.timeout_ms = options.timeout_ms;
  lo.server = name_;
  lookups_ = std::make_unique<LookupChannel>(std::move(lo));
  return lookups_->Start();
}

StatusOr<proto::ControlReply> ServerLink::Call(
    const proto::ControlRequest& request) {
  std::lock_guard<std::mutex> lock(control_mu_);
  return control_->Call(request);
}

Status ServerLink::CheckTable(const proto::TableSpec& spec,
                              const ShardRouter& router) const {
  const proto::ShardTable* found = nullptr;
  for (const auto& st : info_.shard_tables()) {
    if (st.table_id() == spec.id()) found = &st;
  }
  if (found == nullptr) {
    return InvalidArgument(name_ + " has no rows of table " + spec.name());
  }
  const uint64_t first = router.FirstRow(shard_);
  const uint64_t rows = router.RowsOf(shard_);
  const uint64_t bytes = rows * spec.dim() * sizeof(float);
  auto region = rows_.find(spec.id());
  if (found->first_row() != first || found->rows() != rows ||
      region == rows_.end() || region->second.size() < bytes) {
    return InvalidArgument(
        name_ + " holds rows [" + std::to_string(found->first_row()) + ", +" +
        std::to_string(found->rows()) + ") of table " + spec.name() +
        " but the shard map says [" + std::to_string(first) + ", +" +
        std::to_string(rows) + ")");
  }
  return Status::OK();
}

}  // namespace ps::worker
