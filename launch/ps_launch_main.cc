// ps_launch: starts a parameter-server cluster (N ps_server shards and M
// workers, ps_worker by default) from flags or a flagfile, waits until the
// servers are ready, starts the workers, and watches them: it returns when
// the workers are done (stopping the servers), forwards SIGINT/SIGTERM to
// every process, and leaves none behind. See --help.
//
//   ps_launch --flagfile=configs/cluster_example.flags --run_dir=run/x
//
// Exit codes: 0 done; 2 bad flags or flagfile; 1 a cluster that could not
// start; else the code of the first process that failed (see
// launch/cluster.h), 128 + signal when a signal stopped it.
#include <gflags/gflags.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "cli/flags.h"
#include "cli/guarded_main.h"
#include "core/auth.h"
#include "core/transport_name.h"
#include "launch/cluster.h"
#include "launch/secret_memfd.h"
#include "launch/stop_run.h"
#include "protocol/spec_choices.h"

#ifndef PS_SERVER_BIN
#error "PS_SERVER_BIN must name the ps_server binary (set by CMake)"
#endif
#ifndef PS_WORKER_BIN
#error "PS_WORKER_BIN must name the ps_worker binary (set by CMake)"
#endif
#ifndef PS_SOURCE_DIR
#error "PS_SOURCE_DIR must name the source tree (set by CMake)"
#endif

DEFINE_uint32(servers, 2, "ps_server processes (shards), at least 1.");
DEFINE_uint32(workers, 2,
              "Worker processes; 0: servers only, until SIGINT/SIGTERM (or "
              "until every server ended by itself).");
DEFINE_uint32(expected_workers, 0,
              "Workers the servers expect (their --num_workers, and every "
              "worker's): more than --workers leaves room for workers started "
              "elsewhere. 0: --workers (at least 1).");
DEFINE_string(tables, "configs/tables_example.tables",
              "Text-format TableConfig every server serves. A relative path "
              "that is not there from the working folder is taken from the "
              "source tree.");
DEFINE_string(consistency, "async", "async | bsp | ssp (every server).");
DEFINE_uint32(staleness, 2, "SSP bound in steps (with --consistency=ssp).");
DEFINE_string(transport, "auto",
              "auto | shm | tcp, for servers and workers (also exported as "
              "XFER_TRANSPORT unless auto; workers get --transport unless "
              "auto).");
DEFINE_uint32(apply_threads, 1, "Apply threads per server.");
DEFINE_string(server_args, "",
              "More ps_server flags, split at spaces (no quoting), e.g. "
              "\"--checkpoint_dir=ckpt --checkpoint_every_steps=100\". {i} "
              "becomes the shard id.");
DEFINE_string(restore, "",
              "Every server starts with --restore_from=THIS ('latest' or a "
              "checkpoint path; 'latest' needs --checkpoint_dir in "
              "--server_args).");
DEFINE_string(worker_args, "",
              "More worker flags, split at spaces (no quoting). {i} becomes "
              "the worker id (e.g. --metrics_json=m{i}.json). Every worker "
              "also gets --worker_id, --num_workers, --servers (and "
              "--transport unless auto).");
DEFINE_string(build_dir, "",
              "Where ps_server and ps_worker were built (BUILD/server/"
              "ps_server, BUILD/worker/train/ps_worker). Empty: the build this "
              "ps_launch belongs to.");
DEFINE_string(server_bin, "", "The server program. Empty: from --build_dir.");
DEFINE_string(worker_bin, "",
              "The worker program (any program that takes the worker flags "
              "above, e.g. bench/ps_bench). Empty: ps_worker from "
              "--build_dir.");
DEFINE_string(server_prefix, "",
              "Words run before every server's command, split at spaces, {i} "
              "the shard id: --server_prefix='ip netns exec ns{i}'. The "
              "prefix must exec the command (as ip netns exec does) for the "
              "server to die with ps_launch; signals reach its whole process "
              "group either way. A prefix that leaves this host (ssh) needs "
              "the cluster secret in a key file on a path that host has "
              "(see --cluster_secret_file).");
DEFINE_string(worker_prefix, "",
              "The same for every worker ({i} the worker id).");
DEFINE_string(
    cluster_secret_file, "",
    "File holding the cluster's shared secret (as for ps_server: at least "
    "16 bytes, owned by this user or root, chmod 600; group read, 0640 or "
    "0440, is allowed). Empty: $PS_CLUSTER_SECRET_FILE, else "
    "$PS_CLUSTER_SECRET (the secret itself), else none. Every server and "
    "worker gets it as $PS_CLUSTER_SECRET_FILE, never the secret itself in "
    "its environment: a key file by its absolute path; a secret from "
    "$PS_CLUSTER_SECRET through a sealed descriptor they inherit "
    "(/proc/self/fd/N), which ps_launch also wipes from its own "
    "environment. A prefix that leaves this host (ssh) or closes inherited "
    "descriptors (sudo) passes neither on: give a key file at a path every "
    "host has, in --server_args and --worker_args "
    "(--cluster_secret_file=PATH).");
DEFINE_string(server_listen_host, "",
              "Address each server binds (its --listen_host): one for all, or "
              "a comma-separated list with one per shard. Empty: the "
              "server's default (127.0.0.1).");
DEFINE_string(server_advertise_host, "",
              "Address each server is reached by, one for all or one per "
              "shard: passed as --advertise_host and used as the host of its "
              "entry in the workers' --servers. (ps_server takes "
              "--advertise_host from issue 13 on; an older one refuses it.)");
DEFINE_string(run_dir, "",
              "Folder for the logs (server-<i>.log, worker-<j>.log), pid "
              "files, port files (server-<i>.addr) and cluster.env "
              "(SERVERS=...). Must be absent or empty. Default: "
              "./run/cluster-<timestamp>; with --stop, the newest of those.");
DEFINE_uint32(ready_timeout, 30,
              "Seconds a server may take to publish its address.");
DEFINE_uint32(stop_timeout, 20,
              "Seconds a process may take to exit after SIGTERM before "
              "SIGKILL.");
DEFINE_bool(detach, false,
            "Return once the servers are ready and the workers started, "
            "leaving them running in a session of their own (stop them with "
            "--stop). Prints the run folder on its last line.");
DEFINE_bool(stop, false,
            "Stop the cluster of --run_dir (a --detach one, or a running "
            "ps_launch): workers first, then servers, SIGTERM then SIGKILL "
            "after --stop_timeout. Exit 0 when all stopped on SIGTERM, 1 if "
            "something had to be killed.");

namespace {

// The exit codes of ps_launch itself; the others come from the cluster.
enum ExitCode : int { kExitStartFailed = 1, kExitUsage = 2 };

// The one piece of process-wide state: a signal handler can only reach a
// global. It holds the last SIGINT/SIGTERM that arrived (0: none).
volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) { g_signal = sig; }

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void Log(std::string_view line) {
  std::fprintf(stderr, "ps_launch: %.*s\n", static_cast<int>(line.size()),
               line.data());
  std::fflush(stderr);
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "ps_launch: %s\n", message.c_str());
  return code;
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

std::string TablesPath() {
  std::string t = FLAGS_tables;
  if (!t.empty() && t[0] != '/' && access(t.c_str(), R_OK) != 0) {
    std::string in_tree = std::string(PS_SOURCE_DIR) + "/" + t;
    if (access(in_tree.c_str(), R_OK) == 0) t = in_tree;
  }
  return t.empty() ? t : Absolute(t);
}

std::string DefaultRunDir() {
  char stamp[32];
  time_t now = time(nullptr);
  struct tm tm {};
  localtime_r(&now, &tm);
  strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  return "run/cluster-" + std::string(stamp);
}

ps::Status PrepareRunDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    return ps::InvalidArgument("run folder " + dir +
                               " exists and is not empty");
  }
  fs::create_directories(dir, ec);
  if (ec) return ps::IOError("cannot create " + dir + ": " + ec.message());
  return ps::Status::OK();
}

// The spec the flags describe; kInvalidArgument naming the flag whose value
// names no choice.
ps::StatusOr<ps::launch::ClusterSpec> SpecFromFlags(
    const std::string& run_dir) {
  ps::launch::ClusterSpec s;
  const std::string build = FLAGS_build_dir;
  s.server_bin = !FLAGS_server_bin.empty() ? FLAGS_server_bin
                 : !build.empty()          ? build + "/server/ps_server"
                                           : PS_SERVER_BIN;
  s.worker_bin = !FLAGS_worker_bin.empty() ? FLAGS_worker_bin
                 : !build.empty()          ? build + "/worker/train/ps_worker"
                                           : PS_WORKER_BIN;
  s.servers = FLAGS_servers;
  s.workers = FLAGS_workers;
  s.server_num_workers = FLAGS_expected_workers;
  s.tables_path = TablesPath();
  auto consistency = ps::protocol::ConsistencyFromName(FLAGS_consistency);
  if (!consistency.ok())
    return consistency.status().WithContext("--consistency");
  s.consistency = *consistency;
  s.staleness = FLAGS_staleness;
  auto transport = ps::xfer::TransportChoiceFromName(FLAGS_transport);
  if (!transport.ok()) return transport.status().WithContext("--transport");
  s.transport = *transport;
  s.apply_threads = FLAGS_apply_threads;
  s.server_args = ps::launch::SplitWords(FLAGS_server_args);
  if (!FLAGS_restore.empty())
    s.server_args.push_back("--restore_from=" + FLAGS_restore);
  s.worker_args = ps::launch::SplitWords(FLAGS_worker_args);
  s.server_prefix = ps::launch::SplitWords(FLAGS_server_prefix);
  s.worker_prefix = ps::launch::SplitWords(FLAGS_worker_prefix);
  s.listen_hosts = ps::launch::SplitList(FLAGS_server_listen_host);
  s.advertise_hosts = ps::launch::SplitList(FLAGS_server_advertise_host);
  s.run_dir = run_dir;
  s.ready_timeout_ms = int64_t{FLAGS_ready_timeout} * 1000;
  s.stop_timeout_ms = static_cast<int>(FLAGS_stop_timeout) * 1000;
  s.detach = FLAGS_detach;
  return s;
}

int StopMode() {
  std::string dir = FLAGS_run_dir;
  if (dir.empty()) {
    auto newest = ps::launch::NewestRunDir("run");
    if (!newest.ok()) return Fail(kExitUsage, newest.status().message());
    dir = *newest;
  }
  auto code = ps::launch::StopRunDir(
      Absolute(dir), static_cast<int>(FLAGS_stop_timeout) * 1000, Log);
  if (!code.ok()) return Fail(kExitUsage, code.status().message());
  return *code;
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "starts N ps_servers and M workers and watches them.\n"
      "  ps_launch --flagfile=configs/cluster_example.flags [--FLAG=VALUE "
      "...]\n"
      "  ps_launch --stop [--run_dir=DIR]\n"
      "Flags on the command line after --flagfile win over the file's.\n"
      "Exit status: 0 done; 2 bad flags or flagfile; 1 the cluster could "
      "not start; else the first failure's code (a worker's exit code, a "
      "server that ended early or did not stop cleanly), 128 + signal when "
      "stopped by SIGINT/SIGTERM.");
  if (ps::Status s = ps::cli::ParseFlags(&argc, &argv); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  if (FLAGS_stop) return StopMode();

  // Before anything else runs: this wipes $PS_CLUSTER_SECRET from our
  // environment (it must not show in /proc/PID/environ).
  auto secret = ps::xfer::ClusterSecret::ResolveForProgram(
      FLAGS_cluster_secret_file, environ);
  if (!secret.ok()) return Fail(kExitUsage, secret.status().message());
  const std::string run_dir =
      Absolute(FLAGS_run_dir.empty() ? DefaultRunDir() : FLAGS_run_dir);
  ps::StatusOr<ps::launch::ClusterSpec> parsed = SpecFromFlags(run_dir);
  if (!parsed.ok()) return Fail(kExitUsage, parsed.status().message());
  ps::launch::ClusterSpec spec = std::move(*parsed);
  if (ps::Status s = ps::launch::ValidateSpec(spec); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  // Lives as long as ps_launch: the children inherit it as they start.
  std::optional<ps::launch::SecretMemfd> secret_memfd;
  // A key file goes on by its path; a secret without one (from
  // $PS_CLUSTER_SECRET, or a descriptor a launcher above us handed down,
  // which ResolveForProgram made close-on-exec) in a memfd of our own.
  if (!secret->file().empty() &&
      !secret->file().starts_with("/proc/self/fd/")) {
    spec.secret_file = Absolute(secret->file());
  } else if (!secret->empty()) {
    auto memfd = ps::launch::SecretMemfd::Create(secret->bytes());
    if (!memfd.ok()) {
      return Fail(kExitStartFailed,
                  "handing on the cluster secret: " + memfd.status().message());
    }
    secret_memfd = std::move(*memfd);
    spec.secret_file = secret_memfd->path();
  }
  if (ps::Status s = PrepareRunDir(run_dir); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  InstallSignalHandlers();
  const std::string launch_pid = run_dir + "/launch.pid";
  if (!FLAGS_detach) {
    std::ofstream(launch_pid) << getpid() << "\n";
  }
  auto cluster =
      ps::launch::Cluster::Start(spec, Log, [] { return g_signal != 0; });
  if (!cluster.ok()) {
    ::unlink(launch_pid.c_str());
    if (g_signal != 0) return 128 + g_signal;
    return Fail(kExitStartFailed,
                "the cluster did not start: " + cluster.status().ToString());
  }
  std::printf(
      "cluster: %u server(s) at %s, %u worker(s) (%s), consistency %s, "
      "transport %s\nlogs and pid files: %s\n",
      spec.servers, (*cluster)->server_list().c_str(), spec.workers,
      std::filesystem::path(spec.worker_bin).filename().c_str(),
      std::string(ps::protocol::ConsistencyName(spec.consistency)).c_str(),
      std::string(ps::xfer::TransportChoiceName(spec.transport)).c_str(),
      run_dir.c_str());
  std::fflush(stdout);
  if (FLAGS_detach) {
    (*cluster)->Release();
    std::printf("%s\n", run_dir.c_str());
    return 0;
  }
  int code = (*cluster)->Supervise([] { return static_cast<int>(g_signal); });
  ::unlink(launch_pid.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  return ps::cli::GuardedMain("ps_launch", [&] { return Main(argc, argv); });
}
