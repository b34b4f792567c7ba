// ClusterStatus: what `ps_ctl status` asks every server of a cluster and
// how it shows the answers (tools/ps_ctl_main.cc is the program).
//
// QueryCluster asks each server its status (proto::ServerStatusReply, over
// the control channel) on a thread of its own and waits at most
// `timeout_ms` in all: a server that refuses the connection, fails or does
// not answer by then is reported lost, with why, and the others are shown.
// A query still running at the deadline is left to finish on its own (it
// holds no reference to the caller's state), so the caller never waits
// longer than the deadline.
//
// FormatText makes one screen (aligned tables: servers, workers, the latest
// checkpoint, lost peers); FormatJson the same for scripts.
//
// Thread-safety: QueryCluster may be called from any thread; the format
// functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/auth.h"
#include "protocol/ps.pb.h"

namespace ps::tools {

struct ServerAnswer {
  std::string address;  // as asked
  bool answered = false;
  Status error;  // why not, when !answered
  double reply_ms = 0;
  proto::ServerStatusReply status;  // when answered
};

struct ClusterStatus {
  int64_t asked_unix_ms = 0;
  int timeout_ms = 0;
  std::vector<ServerAnswer> servers;  // in the order asked

  size_t lost_servers() const;
};

ClusterStatus QueryCluster(const std::vector<std::string>& addresses,
                           int timeout_ms, const xfer::ClusterSecret& secret);

std::string FormatText(const ClusterStatus& status);
std::string FormatJson(const ClusterStatus& status);

}  // namespace ps::tools
