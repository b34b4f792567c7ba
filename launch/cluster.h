// A parameter-server cluster of real processes: N ps_server shards and M
// workers (ps_worker, or any program that takes the worker flags), started
// and watched by ps_launch.
//
//   auto cluster = Cluster::Start(spec, log, cancelled);   // servers ready,
//                                                          // workers started
//   int code = cluster->Supervise(pending_signal);          // stops them all
//
// Start() launches every server, waits until each published its address
// (its --port_file), writes <run_dir>/cluster.env (SERVERS=host:port,... in
// shard order), then starts the workers with --worker_id, --num_workers,
// --servers and --transport. Every process logs stdout and stderr to
// <run_dir>/{server,worker}-<i>.log and has a pid file beside it.
//
// Exit codes (Supervise): 0 when every worker exited 0 and every server then
// stopped cleanly; else the code of the first failure: a worker's non-zero
// code, a server that ended by itself while workers ran (its code, 1 for
// 0), a server that failed to stop (its code, 1 when it had to be killed);
// 128 + signal when a forwarded signal stopped the cluster.
//
// Thread-safety: one thread drives a Cluster. The destructor stops whatever
// still runs (SIGTERM, SIGKILL after the stop timeout) unless Release()d.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context_options.h"
#include "launch/process.h"
#include "protocol/ps.pb.h"

namespace ps::launch {

struct ClusterSpec {
  std::string server_bin;
  std::string worker_bin;
  uint32_t servers = 2;
  uint32_t workers = 0;
  // The servers' --num_workers; 0: `workers` (at least 1, so that a
  // servers-only cluster serves a worker started by hand).
  uint32_t server_num_workers = 0;
  std::string tables_path;
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 2;
  // kAuto, kShm or kTcp (ValidateSpec refuses kVerbs).
  xfer::TransportChoice transport = xfer::TransportChoice::kAuto;
  uint32_t apply_threads = 1;
  // More flags per process; "{i}" in each is replaced by the process's
  // index (shard id, worker id).
  std::vector<std::string> server_args;
  std::vector<std::string> worker_args;
  // Words run before each command (e.g. {"ip", "netns", "exec", "ns{i}"}),
  // with "{i}" replaced as above. The prefix must exec the command (not fork
  // it) for PR_SET_PDEATHSIG to reach it; signals go to the whole process
  // group either way.
  std::vector<std::string> server_prefix;
  std::vector<std::string> worker_prefix;
  // Per server (one value: for every server; empty: the server's default):
  // the address it binds (--listen_host) and the one it advertises
  // (--advertise_host; also the host of its entry in the workers' --servers).
  std::vector<std::string> listen_hosts;
  std::vector<std::string> advertise_hosts;
  std::string run_dir;  // exists, empty
  // The cluster secret, as every process gets it: its $PS_CLUSTER_SECRET_FILE
  // (a key file's absolute path, or /proc/self/fd/N of a descriptor they
  // inherit, launch/secret_memfd.h). Empty: no secret. Either way no
  // process gets $PS_CLUSTER_SECRET, the secret itself: anyone who may read
  // its /proc/PID/environ would see it.
  std::string secret_file;
  int64_t ready_timeout_ms = 30000;
  int stop_timeout_ms = 20000;
  // The processes are meant to outlive the launcher: no PR_SET_PDEATHSIG,
  // a session of their own (ps_launch --detach; stopped by ps_launch --stop).
  bool detach = false;
};

// Checks a spec before anything starts: counts, choices, the per-server
// lists' lengths, the programs and the tables file (kInvalidArgument).
Status ValidateSpec(const ClusterSpec& spec);

class Cluster {
 public:
  using Log = std::function<void(std::string_view)>;

  // On failure whatever was started is stopped again. `cancelled` is polled
  // while servers start (a signal arrived).
  static StatusOr<std::unique_ptr<Cluster>> Start(
      const ClusterSpec& spec, Log log, const std::function<bool()>& cancelled);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // The workers' --servers list, in shard order.
  const std::string& server_list() const { return server_list_; }
  // Pids in index order (for messages and tests).
  std::vector<pid_t> server_pids() const;
  std::vector<pid_t> worker_pids() const;

  // Watches the processes until the cluster is done (see the exit codes
  // above), stopping everything on the way out. `pending_signal` returns a
  // signal that arrived (0: none); it is forwarded to the workers first,
  // then to the servers.
  int Supervise(const std::function<int()>& pending_signal);

  // Forgets the processes without stopping them (--detach).
  void Release();

 private:
  struct Member {
    std::unique_ptr<Process> process;
    std::string pid_file;
    bool done = false;
  };
  explicit Cluster(ClusterSpec spec, Log log)
      : spec_(std::move(spec)), log_(std::move(log)) {}
  Status StartServers(const std::function<bool()>& cancelled);
  Status StartWorkers();
  StatusOr<std::unique_ptr<Process>> SpawnMember(
      const std::string& name, std::vector<std::string> argv,
      const std::vector<std::string>& prefix, uint32_t index);
  // Signals every running member of `group`, waits, SIGKILLs stragglers.
  // The first non-zero code (1 for a kill), or 0.
  int StopGroup(std::vector<Member>& group, int sig);
  // Stops the workers, then the servers; `result`, or else the servers'
  // stop code.
  int Finish(int result);
  // A member exited: logs it and removes its pid file.
  void Reaped(Member& m, int code);

  ClusterSpec spec_;
  Log log_;
  std::vector<Member> servers_;
  std::vector<Member> workers_;
  std::string server_list_;
};

// Splits a flag value into words at spaces and tabs (no quoting: a value
// with a space cannot be passed).
std::vector<std::string> SplitWords(std::string_view text);
// Splits "a,b,c" at commas ("" -> {}).
std::vector<std::string> SplitList(std::string_view text);

}  // namespace ps::launch
