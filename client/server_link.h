// ServerLink: this worker's connection to one server (one shard): the
// control channel it said hello on, the xfer endpoint, the regions the
// server exported (each table's rows, the status words, this worker's
// inbox and lookup replies), the InboxWriter on that inbox and, on a server
// with EXACT tables, the LookupChannel that reads their rows.
//
// Thread-safe: Call serializes requests on the control channel; the
// endpoint and the inbox writer are thread-safe themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "base/status_or.h"
#include "client/inbox_writer.h"
#include "client/lookup_channel.h"
#include "client/shard_router.h"
#include "core/context.h"
#include "protocol/control_channel.h"
#include "protocol/ps.pb.h"

namespace ps::worker {

class ServerLink {
 public:
  struct Options {
    std::string address;  // the server's control address
    uint32_t shard = 0;   // the shard the server list makes it
    uint32_t num_shards = 1;
    uint32_t worker_id = 0;
    uint32_t num_workers = 1;
    int timeout_ms = 30000;
    xfer::ClusterSecret secret;
    ShardCounters* counters = nullptr;  // credit waits (client_counters.h)
  };

  // Says hello as worker `worker_id`, checks the server is the expected
  // shard with a usable inbox, connects `xfer` to it, imports its regions
  // and starts the inbox writer. Completes when all of that is done.
  static StatusOr<std::unique_ptr<ServerLink>> Connect(xfer::Context& xfer,
                                                       const Options& options);

  // "server 1 (127.0.0.1:7001)", for messages.
  const std::string& name() const { return name_; }
  // What the server answered the hello with (tables, consistency, ...).
  const proto::ClusterInfo& info() const { return info_; }
  xfer::Endpoint& endpoint() const { return *endpoint_; }
  const xfer::RemoteRegion& status() const { return status_; }
  // The rows region of a HASHED or DENSE table (CheckTable found it).
  const xfer::RemoteRegion& rows(uint32_t table_id) const {
    return rows_.at(table_id);
  }
  InboxWriter& inbox() const { return *inbox_; }
  // Null when the server announced no lookup replies (it has no EXACT
  // table).
  LookupChannel* lookups() const { return lookups_.get(); }

  // One control request; completes when the reply arrives.
  StatusOr<proto::ControlReply> Call(const proto::ControlRequest& request);

  // Checks that the server holds the rows of table `spec` that `router`
  // assigns to its shard.
  Status CheckTable(const proto::TableSpec& spec,
                    const ShardRouter& router) const;

 private:
  ServerLink() = default;
  Status Open(xfer::Context& xfer, const Options& options);

  uint32_t shard_ = 0;
  std::string name_;
  proto::ClusterInfo info_;
  std::mutex control_mu_;  // one request at a time on the control channel
  std::optional<protocol::ControlClient> control_;
  std::shared_ptr<xfer::Endpoint> endpoint_;
  std::unordered_map<uint32_t, xfer::RemoteRegion> rows_;  // by table id
  xfer::RemoteRegion status_;
  std::unique_ptr<InboxWriter> inbox_;
  std::unique_ptr<LookupChannel> lookups_;
};

}  // namespace ps::worker
