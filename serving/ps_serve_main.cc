// ps_serve: a serving replica. It follows a training cluster's checkpoint
// folder (read-only: serving/checkpoint_follower.h) and answers lookups
// from the newest complete checkpoint over the one-sided core
// (serving/lookup_service.h; clients: serving/serving_client.h, Python
// ps.serving).
//
//   ps_serve --checkpoint_dir=/ckpt --port=7100 --metrics_port=9100
//
// It listens once it serves a checkpoint (it waits for the first one to
// be committed), then writes --port_file. Exit codes: 0 after SIGTERM or
// SIGINT, 1 a runtime failure (a port that cannot be bound, ...), 2 bad
// flags.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/log_limiter.h"
#include "cli/flags.h"
#include "cli/guarded_main.h"
#include "cli/port_file.h"
#include "core/context_environment.h"
#include "core/transport_name.h"
#include "metrics/exporter.h"
#include "metrics/process_collector.h"
#include "serving/checkpoint_follower.h"
#include "serving/lookup_service.h"
#include "table/rocksdb_cold_row_store.h"

DEFINE_string(checkpoint_dir, "",
              "The training cluster's checkpoint folder (ps_server "
              "--checkpoint_dir), which this replica only reads. Required.");
DEFINE_string(shards, "",
              "The shards to hold, comma-separated (e.g. 0,2); empty: all. "
              "A lookup of a key of another shard is refused.");
DEFINE_int32(
    poll_ms, 50,
    "How often the folder is looked at for a newer checkpoint, in "
    "milliseconds [1, 60000]: a listing of the folder and, when a newer "
    "checkpoint is there, its MANIFEST.");
DEFINE_int32(port, 0,
             "TCP port of the control listener lookup clients say hello on; "
             "0 picks a free port (see --port_file).");
DEFINE_int32(xfer_port, 0,
             "TCP port of the one-sided transfer listener; 0 picks a free "
             "port (clients learn it from the hello).");
DEFINE_string(listen_host, "127.0.0.1",
              "Address both listeners bind to: one address, or 0.0.0.0 / :: "
              "for every interface. Anything but a loopback address needs a "
              "cluster secret (--cluster_secret_file).");
DEFINE_string(advertise_host, "",
              "Address clients are told to dial. Empty: --listen_host, or "
              "for 0.0.0.0 / :: the first non-loopback address of this host.");
DEFINE_string(cluster_secret_file, "",
              "File holding the cluster's shared secret, as ps_server's flag "
              "of that name (chmod 600; at least 16 bytes). Clients must "
              "prove it. Empty: $PS_CLUSTER_SECRET_FILE, else "
              "$PS_CLUSTER_SECRET, else none (loopback only).");
DEFINE_int32(timeout_ms, 30000,
             "A client silent this long in its hello, or a transfer peer "
             "silent this long, is dropped.");
DEFINE_uint32(max_connections, 64, "Lookup clients attached at once.");
DEFINE_uint32(max_keys, 65536,
              "The most keys one lookup may hold [1, 16777216]; each client "
              "gets a request region of 8 bytes a key here.");
DEFINE_int32(lookup_threads, 1,
             "Threads answering lookups [1, 64]; each answers one at a time "
             "(one is fastest for a few clients: measured, a second one "
             "slowed a single tcp client by a quarter on 2 cores).");
DEFINE_string(transport, "auto",
              "Transport of the lookups: auto (shm on the same host, verbs "
              "where both have RDMA, else tcp), shm, tcp or verbs.");
DEFINE_string(port_file, "",
              "Once serving, write 'host:port' of the control listener "
              "here (through a rename: whole or absent).");
DEFINE_int32(metrics_port, -1,
             "Serve Prometheus metrics at http://<--metrics_host>:PORT/"
             "metrics: the checkpoint served (step, commit time, seconds "
             "behind the newest), switches, lookups and keys per table, "
             "lookup latency; 0 picks a free port (logged); -1: off.");
DEFINE_string(metrics_host, "127.0.0.1", ps::metrics::kMetricsHostHelp);
DEFINE_string(disk_tier_dir, "",
              "Folder of this replica's disk tier, for EXACT tables whose "
              "rows move to disk at their memory bound (when_full: "
              "WHEN_FULL_MOVE_TO_DISK): the replica keeps the same bound "
              "(capacity rows per held shard) in memory, the other rows "
              "there, and brings in the rows lookups read. Scratch, not a "
              "copy to keep: what an earlier replica left there is removed "
              "at start. Required by such tables; unused by others. Not "
              "the checkpoint folder (which is only read).");
DEFINE_int32(disk_tier_read_threads,
             ps::table::RocksDbColdRowStore::kDefaultReadThreads,
             "Threads a lookup's reads of a tiered table's disk store run "
             "on, each sending its reads to the disk in io_uring batches "
             "[1, 256].");
DEFINE_uint32(promote_per_poll, 8192,
              "Rows per tiered table that each poll (--poll_ms) brings into "
              "memory from those lookups read from disk twice, moving out "
              "rows no lookup read lately [0, 16777216]; 0: none move "
              "after the first load.");

namespace {

constexpr int kExitRuntime = 1, kExitBadConfig = 2;

ps::StatusOr<std::vector<uint32_t>> ParseShards(const std::string& text) {
  std::vector<uint32_t> shards;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (*end != '\0' || item[0] == '-' || v > UINT32_MAX) {
      return ps::InvalidArgument("--shards: '" + item +
                                 "' is not a shard number");
    }
    shards.push_back(static_cast<uint32_t>(v));
  }
  return shards;
}

ps::StatusOr<uint16_t> Port(const char* name, int32_t v) {
  PS_RETURN_IF_ERROR(ps::cli::CheckIntFlag(name, v, 0, 65535));
  return static_cast<uint16_t>(v);
}

ps::StatusOr<ps::serving::LookupService::Options> ServiceOptions() {
  ps::serving::LookupService::Options o;
  PS_ASSIGN_OR_RETURN(o.control.port, Port("port", FLAGS_port));
  PS_ASSIGN_OR_RETURN(o.xfer.listen_port, Port("xfer_port", FLAGS_xfer_port));
  o.control.host = o.xfer.listen_host = FLAGS_listen_host;
  o.control.advertise_host = o.xfer.advertise_host = FLAGS_advertise_host;
  PS_ASSIGN_OR_RETURN(o.xfer.secret, ps::xfer::ClusterSecret::ResolveForProgram(
                                         FLAGS_cluster_secret_file, environ));
  o.control.secret = o.xfer.secret;
  PS_RETURN_IF_ERROR(
      ps::cli::CheckIntFlag("timeout_ms", FLAGS_timeout_ms, 100, 3600000));
  o.control.timeout_ms = o.xfer.peer_timeout_ms = FLAGS_timeout_ms;
  o.control.max_connections = FLAGS_max_connections;
  o.xfer.name = "serve";
  auto transport = ps::xfer::TransportChoiceFromName(FLAGS_transport);
  if (!transport.ok()) return transport.status().WithContext("--transport");
  o.xfer.transport = *transport;
  PS_ASSIGN_OR_RETURN(o.xfer,
                      ps::xfer::ApplyEnvironment(std::move(o.xfer), environ));
  if (FLAGS_max_keys < 1 || FLAGS_max_keys > (1u << 24)) {
    return ps::InvalidArgument("--max_keys must be in [1, 16777216], not " +
                               std::to_string(FLAGS_max_keys));
  }
  o.max_keys = FLAGS_max_keys;
  PS_RETURN_IF_ERROR(
      ps::cli::CheckIntFlag("lookup_threads", FLAGS_lookup_threads, 1, 64));
  o.threads = FLAGS_lookup_threads;
  return o;
}

// What the metrics report of the follower: its last poll.
class FollowState {
 public:
  void Record(const ps::serving::CheckpointFollower::PollResult& r) {
    std::lock_guard lock(mu_);
    last_ = r;
    if (r.action != ps::serving::FollowAction::kNone) {
      ++switches_[static_cast<int>(r.action)];
      last_switch_seconds_ = r.apply_seconds;
    }
  }
  void Skipped() {
    std::lock_guard lock(mu_);
    ++skipped_;
  }
  void Report(ps::metrics::CollectorSink& sink) const {
    std::lock_guard lock(mu_);
    const auto& served = last_.served;
    sink.Gauge("ps_serve_checkpoint_step",
               "Step of the checkpoint this replica serves.", {},
               static_cast<double>(served.step));
    sink.Gauge("ps_serve_checkpoint_commit_time_seconds",
               "When the served checkpoint was committed (Unix time).", {},
               served.created_unix_ms / 1e3);
    sink.Gauge("ps_serve_newest_checkpoint_step",
               "Step of the newest complete checkpoint in the folder.", {},
               static_cast<double>(last_.newest.step));
    sink.Gauge(
        "ps_serve_seconds_behind_newest",
        "Commit time of the newest complete checkpoint minus that of the "
        "served one (0: serving the newest).",
        {},
        std::max<double>(
            0, (last_.newest.created_unix_ms - served.created_unix_ms) / 1e3));
    for (auto a : {ps::serving::FollowAction::kLoaded,
                   ps::serving::FollowAction::kIncremental,
                   ps::serving::FollowAction::kCompared}) {
      sink.Counter("ps_serve_switches_total",
                   "Checkpoints switched to, by how (loaded whole, "
                   "increments applied, compared and the differences "
                   "applied).",
                   {{"how", ps::serving::FollowActionName(a)}},
                   static_cast<double>(switches_[static_cast<int>(a)]));
    }
    sink.Counter("ps_serve_poll_errors_total",
                 "Looks at the folder that failed: a checkpoint that could "
                 "not be applied (skipped, logged with the reason; the "
                 "served one stayed) or a folder that could not be listed.",
                 {}, static_cast<double>(skipped_));
    sink.Gauge("ps_serve_last_switch_seconds",
               "How long the last switch took (reading, comparing, "
               "applying).",
               {}, last_switch_seconds_);
  }

 private:
  mutable std::mutex mu_;
  ps::serving::CheckpointFollower::PollResult last_;
  uint64_t switches_[4] = {};
  uint64_t skipped_ = 0;
  double last_switch_seconds_ = 0;
};

// The figures of each table with a disk tier.
void ReportTiers(const ps::serving::ServedTables& tables,
                 ps::metrics::CollectorSink& k) {
  for (const auto& spec : tables.manifest().tables()) {
    if (!tables.tiered(spec.id())) continue;
    const auto t = tables.tier_stats(spec.id());
    const ps::metrics::Labels labels = {{"table", spec.name()}};
    k.Gauge("ps_serve_tier_memory_rows",
            "Rows of a tiered table in memory (the others are on disk).",
            labels, static_cast<double>(tables.exact_rows(spec.id())));
    k.Gauge("ps_serve_tier_memory_bound_rows",
            "The most rows of a tiered table kept in memory.", labels,
            static_cast<double>(t.memory_bound));
    k.Counter("ps_serve_tier_disk_reads_total",
              "Keys lookups read from a tiered table's disk store.", labels,
              static_cast<double>(t.disk_reads));
    k.Counter("ps_serve_tier_promoted_rows_total",
              "Rows moved from disk into memory because lookups read them.",
              labels, static_cast<double>(t.promoted));
    k.Counter("ps_serve_tier_demoted_rows_total",
              "Rows moved out to disk to make room.", labels,
              static_cast<double>(t.demoted));
    k.Counter("ps_serve_tier_disk_read_bytes_total",
              "Bytes read from a tiered table's disk stores.", labels,
              static_cast<double>(t.bytes_read));
    k.Counter("ps_serve_tier_disk_written_bytes_total",
              "Bytes written to a tiered table's disk stores.", labels,
              static_cast<double>(t.bytes_written));
  }
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "a serving replica: follows a training cluster's checkpoint folder "
      "(read-only) and answers lookups from the newest complete "
      "checkpoint.\n"
      "  ps_serve --checkpoint_dir=DIR [--port=P --port_file=F "
      "--metrics_port=M --shards=0,2 ...]\n"
      "Stops on SIGTERM or SIGINT (exit 0).");
  if (getenv("TZ") == nullptr) setenv("TZ", ":/etc/localtime", 0);
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    std::fprintf(stderr, "ps_serve: %s\n", s.message().c_str());
    return kExitBadConfig;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_log_dir.empty()) FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1] << "' (see --help)";
    return kExitBadConfig;
  }
  if (FLAGS_checkpoint_dir.empty()) {
    LOG(ERROR) << "--checkpoint_dir is required";
    return kExitBadConfig;
  }
  auto shards = ParseShards(FLAGS_shards);
  auto options = ServiceOptions();
  ps::Status flags = ps::cli::CheckIntFlag("poll_ms", FLAGS_poll_ms, 1, 60000);
  if (flags.ok() && !shards.ok()) flags = shards.status();
  if (flags.ok() && !options.ok()) flags = options.status();
  if (flags.ok() && (FLAGS_metrics_port < -1 || FLAGS_metrics_port > 65535)) {
    flags = ps::InvalidArgument(
        "--metrics_port must be -1 (off) or in "
        "[0, 65535], not " +
        std::to_string(FLAGS_metrics_port));
  }
  if (flags.ok() && FLAGS_metrics_port >= 0) {
    flags = ps::metrics::CheckHost(FLAGS_metrics_host)
                .WithContext("--metrics_host");
  }
  if (flags.ok()) {
    flags = ps::cli::CheckIntFlag("disk_tier_read_threads",
                                  FLAGS_disk_tier_read_threads, 1, 256);
  }
  if (flags.ok() && FLAGS_promote_per_poll > (1u << 24)) {
    flags = ps::InvalidArgument(
        "--promote_per_poll must be in [0, 16777216], not " +
        std::to_string(FLAGS_promote_per_poll));
  }
  if (flags.ok() && !FLAGS_disk_tier_dir.empty() &&
      std::filesystem::weakly_canonical(FLAGS_disk_tier_dir) ==
          std::filesystem::weakly_canonical(FLAGS_checkpoint_dir)) {
    flags = ps::InvalidArgument(
        "--disk_tier_dir must not be the checkpoint folder, which a replica "
        "only reads");
  }
  if (!flags.ok()) {
    LOG(ERROR) << flags;
    return kExitBadConfig;
  }

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::atomic<bool> stop{false};
  std::thread signal_thread([&] {
    const timespec tick{0, 100 * 1000 * 1000};
    while (!stop.load()) {
      const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig > 0) {
        LOG(INFO) << "received " << strsignal(sig) << ": stopping";
        stop = true;
      }
    }
  });
  struct JoinOnExit {
    std::atomic<bool>* stop;
    std::thread* t;
    ~JoinOnExit() {
      stop->store(true);
      t->join();
    }
  } join_signal_thread{&stop, &signal_thread};

  ps::serving::CheckpointFollower follower(
      {.root = FLAGS_checkpoint_dir,
       .shards = *shards,
       .disk_tier = {.dir = FLAGS_disk_tier_dir,
                     .read_threads = FLAGS_disk_tier_read_threads},
       .promote_per_poll = FLAGS_promote_per_poll});
  FollowState state;
  const auto poll_every = std::chrono::milliseconds(FLAGS_poll_ms);
  ps::LogLimiter poll_errors(std::chrono::seconds(10));
  auto poll = [&]() -> ps::Status {
    auto r = follower.Poll();
    if (!r.ok()) {
      state.Skipped();
      uint64_t held_back = 0;
      if (poll_errors.Allow(&held_back)) {
        LOG(WARNING) << r.status()
                     << (held_back > 0 ? " (and " + std::to_string(held_back) +
                                             " more errors)"
                                       : "");
      }
      return r.status();
    }
    state.Record(*r);
    if (r->action == ps::serving::FollowAction::kNone) return ps::Status::OK();
    LOG(INFO) << "serving " << r->served.name << " ("
              << ps::serving::FollowActionName(r->action) << ", "
              << r->rows_changed << " rows in " << r->apply_seconds
              << " s; committed "
              << (std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count() -
                  r->served.created_unix_ms) /
                     1e3
              << " s ago)";
    return ps::Status::OK();
  };
  // The first checkpoint: nothing is served (nor listened for) before it.
  auto waiting_since = std::chrono::steady_clock::now();
  while (!stop.load() && follower.tables() == nullptr) {
    // A checkpoint these flags cannot serve (shards it lacks, a tiered
    // table without --disk_tier_dir) ends the wait: a later one would not
    // do better.
    if (ps::Status s = poll(); s.Is(ps::StatusCode::kInvalidArgument)) {
      return kExitBadConfig;
    }
    if (follower.tables() != nullptr) break;
    if (std::chrono::steady_clock::now() - waiting_since >
        std::chrono::seconds(10)) {
      LOG(INFO) << "waiting for a complete checkpoint under "
                << FLAGS_checkpoint_dir;
      waiting_since = std::chrono::steady_clock::now();
    }
    std::this_thread::sleep_for(poll_every);
  }
  if (stop.load()) return 0;

  ps::metrics::Registry registry;
  ps::metrics::Histogram* latency = nullptr;
  if (FLAGS_metrics_port >= 0) {
    latency = registry
                  .AddHistogram("ps_serve_lookup_seconds",
                                "Seconds a lookup took on the replica, from "
                                "its packet's arrival to its rows sent.",
                                ps::metrics::ExponentialBounds(1e-6, 2, 24))
                  .value();
  }
  auto service = ps::serving::LookupService::Start(
      std::move(*options), [&] { return follower.tables(); }, latency);
  if (!service.ok()) {
    LOG(ERROR) << "cannot listen: " << service.status();
    return service.status().Is(ps::StatusCode::kInvalidArgument)
               ? kExitBadConfig
               : kExitRuntime;
  }
  std::unique_ptr<ps::metrics::Exporter> exporter;
  if (FLAGS_metrics_port >= 0) {
    ps::serving::LookupService* s = service->get();
    registry.AddCollector(
        [s, &state, &follower](ps::metrics::CollectorSink& k) {
          state.Report(k);
          s->ReportMetrics(k);
          auto tables = follower.tables();
          k.Gauge("ps_serve_table_bytes",
                  "Bytes of the rows this replica holds in memory.", {},
                  tables ? static_cast<double>(tables->bytes()) : 0.0);
          if (tables) ReportTiers(*tables, k);
        });
    ps::metrics::AddProcessCollector(&registry);
    auto e = ps::metrics::Exporter::Start(&registry, FLAGS_metrics_host,
                                          FLAGS_metrics_port);
    if (!e.ok()) {
      LOG(ERROR) << "--metrics_port: " << e.status();
      return kExitRuntime;
    }
    exporter = std::move(*e);
    LOG(INFO) << "metrics: " << exporter->url();
  }
  if (!FLAGS_port_file.empty()) {
    if (ps::Status w = ps::cli::WritePortFile(FLAGS_port_file,
                                              (*service)->control_address());
        !w.ok()) {
      LOG(ERROR) << "--port_file: " << w;
      return kExitRuntime;
    }
  }
  LOG(INFO) << "ready: control " << (*service)->control_address() << ", xfer "
            << (*service)->xfer_address();
  while (!stop.load()) {
    std::this_thread::sleep_for(poll_every);
    (void)poll();  // logged; the served checkpoint stays
  }
  exporter.reset();
  (*service)->Stop();
  LOG(INFO) << "exited cleanly";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ps::cli::GuardedMain("ps_serve", [&] { return Main(argc, argv); });
}
