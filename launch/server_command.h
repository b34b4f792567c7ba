// The command line of one ps_server of a cluster, as ps_launch and the
// multi-process tests start it: every server of a cluster gets the same
// cluster-wide flags, its own shard and port file, and --port=0 (it picks a
// free port and publishes it in the port file).
//
// Thread-safety: a plain value type and a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/context_options.h"
#include "protocol/ps.pb.h"

namespace ps::launch {

struct ServerCommand {
  std::string binary;  // the ps_server program
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t num_workers = 1;
  std::string port_file;
  std::string listen_host;  // empty: the server's default (127.0.0.1)
  std::string tables_path;  // text-format TableConfig
  uint32_t apply_threads = 1;
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 2;
  // kAuto, kShm or kTcp: the choices of ps_server's --transport.
  xfer::TransportChoice transport = xfer::TransportChoice::kAuto;
  uint32_t inbox_slots = 0;              // 0: the server's default
  uint32_t slot_bytes = 0;               // 0: the server's default
  std::vector<std::string> extra_flags;  // last: they win over the above
};

// argv for execve: binary first.
std::vector<std::string> ServerArgv(const ServerCommand& c);

}  // namespace ps::launch
