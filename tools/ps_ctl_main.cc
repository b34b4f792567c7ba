// ps_ctl: looks at a running cluster from outside.
//
//   ps_ctl status --servers=127.0.0.1:7000,127.0.0.1:7001 [--json]
//   ps_ctl status --run_dir=DIR        (a ps_launch run folder)
//
// Asks every server over its control channel (tools/cluster_status.h) and
// prints one screen: servers, workers with their clocks and inboxes, the
// latest checkpoint and any lost peer. Never waits longer than
// --timeout_ms. Exit status: 0 every server answered, 3 at least one did
// not (lost; the others are shown), 2 bad usage, 1 failed otherwise (a
// --run_dir without a server list, a bad cluster secret).
//
// Thread-safety: a program; the queries run on threads of their own.
#include <gflags/gflags.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/guarded_main.h"
#include "core/auth.h"
#include "tools/cluster_status.h"

DEFINE_string(servers, "",
              "Control addresses of the servers, host:port, comma-separated "
              "(what their --port_file holds; ps_launch's cluster.env names "
              "them as SERVERS=...).");
DEFINE_string(run_dir, "",
              "A ps_launch --run_dir: the servers are read from its "
              "cluster.env (instead of --servers).");
DEFINE_int32(timeout_ms, 3000,
             "The most the command waits for the servers, in all; a server "
             "that has not answered by then is reported lost.");
DEFINE_bool(json, false,
            "Print JSON (one object: servers, workers, latest_checkpoint, "
            "lost) instead of the tables.");
DEFINE_string(cluster_secret_file, "",
              "The cluster's secret, when its servers have one (as for "
              "ps_server: owned by this user or root, chmod 600, group read "
              "allowed; empty: $PS_CLUSTER_SECRET_FILE, else "
              "$PS_CLUSTER_SECRET, else none).");

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitLost = 3;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "ps_ctl: %s\n", message.c_str());
  return code;
}

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t a = item.find_first_not_of(" \t");
    const size_t b = item.find_last_not_of(" \t");
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

// SERVERS=... of <run_dir>/cluster.env.
ps::StatusOr<std::string> ServersOfRunDir(const std::string& dir) {
  const std::string path = dir + "/cluster.env";
  std::ifstream in(path);
  if (!in) return ps::NotFound("cannot read " + path + " (--run_dir)");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SERVERS=", 0) == 0) return line.substr(8);
  }
  return ps::NotFound(path + " has no SERVERS= line");
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "shows how a running cluster stands.\n"
      "  ps_ctl status --servers=HOST:PORT,... [--json] [--timeout_ms=MS]\n"
      "  ps_ctl status --run_dir=DIR   (a ps_launch run folder)\n"
      "One screen: every server (state, rows applied, last checkpoint cut), "
      "every worker (connected or gone, its clock on shard 0, its inbox "
      "occupancy on each shard, packets applied), the latest complete "
      "checkpoint and the lost peers. A server that does not answer within "
      "--timeout_ms is reported lost; the others are still shown.\n"
      "Exit status: 0 every server answered, 3 at least one server lost, "
      "2 bad usage, 1 failed (e.g. --run_dir without a server list).");
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc != 2 || std::string(argv[1]) != "status") {
    return Fail(kExitUsage, "give one command: status (see --help)");
  }
  if (ps::Status s =
          ps::cli::CheckIntFlag("timeout_ms", FLAGS_timeout_ms, 1, 3600 * 1000);
      !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  std::string list = FLAGS_servers;
  if (!FLAGS_run_dir.empty()) {
    if (!list.empty()) {
      return Fail(kExitUsage, "give --servers or --run_dir, not both");
    }
    auto servers = ServersOfRunDir(FLAGS_run_dir);
    if (!servers.ok()) return Fail(kExitFailed, servers.status().message());
    list = *servers;
  }
  const std::vector<std::string> addresses = SplitList(list);
  if (addresses.empty()) {
    return Fail(kExitUsage,
                "no servers: give --servers=HOST:PORT,... or --run_dir");
  }
  for (const std::string& a : addresses) {
    if (a.find(':') == std::string::npos) {
      return Fail(kExitUsage, "--servers: '" + a + "' is not host:port");
    }
  }
  // Before QueryCluster starts its threads (this writes to the environment).
  auto secret = ps::xfer::ClusterSecret::ResolveForProgram(
      FLAGS_cluster_secret_file, environ);
  if (!secret.ok()) return Fail(kExitFailed, secret.status().message());

  const ps::tools::ClusterStatus status =
      ps::tools::QueryCluster(addresses, FLAGS_timeout_ms, *secret);
  const std::string text = FLAGS_json ? ps::tools::FormatJson(status)
                                      : ps::tools::FormatText(status);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return status.lost_servers() > 0 ? kExitLost : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const int rc =
      ps::cli::GuardedMain("ps_ctl", [&] { return Main(argc, argv); });
  // A query still waiting on a stuck server must not hold up the exit (nor
  // see the statics destroyed under it): leave at once.
  std::fflush(nullptr);
  std::_Exit(rc);
}
