// ps_server: serves one shard of the parameter tables.
//
//   ps_server --tables=configs/tables_example.tables --shard_id=0
//             --num_shards=2 --num_workers=3 --port=0 --port_file=/run/s0
//   (one line)
//
// Exit codes: 0 after a clean stop (SIGTERM, SIGINT or a Shutdown request:
// control closed, inboxes drained, final stats logged), 2 for bad flags or a
// bad table config, 1 when the server cannot start (e.g. a port in use).
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "cli/flags.h"
#include "cli/port_file.h"
#include "cli/version.h"
#include "core/context_environment.h"
#include "core/transport_name.h"
#include "metrics/exporter.h"
#include "metrics/process_collector.h"
#include "protocol/spec_choices.h"
#include "protocol/table_config.h"
#include "server/device_option.h"
#include "server/server.h"
#include "table/rocksdb_cold_row_store.h"

DEFINE_uint32(shard_id, 0, "This server's shard, in [0, --num_shards).");
DEFINE_uint32(num_shards, 1, "Number of servers (shards) in the cluster.");
DEFINE_uint32(num_workers, 1,
              "Number of workers; each gets its own inbox on this server.");
DEFINE_int32(port, 0,
             "TCP port of the control listener (hello, exact-key pushes and "
             "pulls, stats, shutdown); 0 picks a free port (see --port_file).");
DEFINE_int32(xfer_port, 0,
             "TCP port of the one-sided transfer listener; 0 picks a free "
             "port (workers learn it from the control hello).");
DEFINE_string(listen_host, "127.0.0.1",
              "Address both listeners bind to: one address, or 0.0.0.0 / :: "
              "for every interface. Anything but a loopback address needs a "
              "cluster secret (--cluster_secret_file).");
DEFINE_string(advertise_host, "",
              "Address workers and other servers are told to dial (in the "
              "port file, the checkpoint folder's server records and the "
              "control hello). Empty: --listen_host, or for 0.0.0.0 / :: the "
              "first non-loopback address of this host (or container). Set "
              "it behind NAT or to a name peers resolve.");
DEFINE_string(
    cluster_secret_file, "",
    "File holding the cluster's shared secret (at least 16 bytes; a "
    "regular file owned by this user or root, with no group write and "
    "nothing for other users: chmod 600; group read, 0640 or 0440 as "
    "Kubernetes mounts a Secret, is allowed). Every server and worker "
    "gets the same one; each connection then starts with a "
    "challenge-response (HMAC-SHA256 over both sides' nonces), and a peer "
    "that cannot prove the secret gets nothing. Empty: "
    "$PS_CLUSTER_SECRET_FILE, else $PS_CLUSTER_SECRET (the secret itself; "
    "wiped from this process's environment at start, but better a file: "
    "whoever starts the process saw it), else none (loopback only).");
DEFINE_int32(timeout_ms, 30000,
             "A peer silent this long is lost: another shard whose checkpoint "
             "part shard 0 waits for (the checkpoint is then abandoned), a "
             "control message that stopped half-way, a hello not finished. "
             "A worker whose tcp connection broke may re-establish it "
             "within this long and go on where it was.");
DEFINE_uint32(max_control_connections, 0,
              "Control connections served at once (more are refused at "
              "once); 0: 2 per worker + 1 per shard + 8.");
DEFINE_string(tables, "",
              "Path of a text-format TableConfig (configs/*.tables) with the "
              "tables to serve. Required.");
DEFINE_uint32(apply_threads, 1,
              "Threads that drain the inboxes and apply gradients (at most "
              "one per worker; with one, rows are updated without atomics).");
DEFINE_string(consistency, "async",
              "async (no waiting), bsp (Clock() waits for every worker and "
              "push of the step) or ssp (a worker may run --staleness steps "
              "ahead of the slowest). Workers learn it from the hello.");
DEFINE_uint32(staleness, 2, "SSP bound in steps (with --consistency=ssp).");
DEFINE_string(transport, "auto",
              "auto (shm to same-host peers, else tcp), shm or tcp: the "
              "transport this server's xfer Context prefers. With auto, "
              "$XFER_TRANSPORT (auto, shm, tcp or verbs) decides when set; "
              "$XFER_IB_DEV, $XFER_IB_PORT and $XFER_IB_GID_INDEX pick the "
              "RDMA device for verbs.");
DEFINE_int32(cpu_wakeup_latency_us, -1,
             "While running, ask the kernel to wake every CPU of this machine "
             "within this many microseconds (PM QoS, /dev/cpu_dma_latency; "
             "needs root): 0 keeps idle CPUs polling, which cuts a tcp "
             "atomic's round trip to an idle server on a VM by the 15-30 us "
             "of waking a halted vCPU, and keeps the CPUs busy. -1: leave the "
             "machine as it is.");
DEFINE_string(device, "",
              "Where the HASHED and DENSE tables live: empty or host (host "
              "memory), cuda or cuda:N (that GPU's memory: rows and optimizer "
              "state there, packets applied by its kernels after the host "
              "has checked them; same-host workers pull over CUDA IPC, tcp "
              "ones through host memory; EXACT tables stay in host "
              "memory). Not over verbs.");
DEFINE_uint32(inbox_slots, 64,
              "Slots per worker inbox: how many packets a worker may have in "
              "flight to this server before it waits for credit. A server "
              "with EXACT tables also gives each worker a lookup reply "
              "region as large as its inbox (slots x slot bytes), where it "
              "answers that worker's pulls of them.");
DEFINE_uint32(slot_bytes, 262144,
              "Bytes per inbox slot (a multiple of 64, >= 256): 16 bytes of "
              "slot header, the rest the largest packet.");
DEFINE_bool(keys_in_hash_order, true,
            "Tell workers that EXACT keys may come in the order the tables "
            "file them (sorted by their hash: faster pushes and pulls). "
            "false: workers send keys as to a server built before that "
            "order existed (for tests of mixed builds).");
DEFINE_uint32(stats_every_secs, 0,
              "Log the counters every this many seconds; 0: only at exit.");
DEFINE_string(port_file, "",
              "When set, write \"host:port\" of the control listener to this "
              "file once the server accepts connections (how scripts and "
              "tests find a --port=0 server). Written atomically.");
DEFINE_uint32(idle_spin_us, 50,
              "Idle policy of the apply threads: after the last packet they "
              "poll without sleeping for up to this many microseconds, then "
              "sleep until a packet rings the inboxes' doorbell (a worker's "
              "put wakes them; an idle server costs no CPU). They poll only "
              "while packets come within this window: after a longer gap "
              "they sleep at once until a shorter one is seen again.");
DEFINE_uint32(idle_sleep_min_us, 50,
              "Idle policy with several --apply_threads (a ring may be for "
              "another thread's inbox): the first sleep (microseconds) between "
              "looks of an idle apply thread; it doubles on every empty look "
              "up to --idle_sleep_max_us. One apply thread sleeps until a "
              "ring.");
DEFINE_uint32(idle_sleep_max_us, 200,
              "Idle policy with several --apply_threads: the longest sleep "
              "(microseconds) between looks of an idle apply thread, i.e. the "
              "most latency a pause adds to a packet whose ring another thread "
              "heard. 0: never sleep, spin (only with dedicated cores).");
DEFINE_string(checkpoint_dir, "",
              "Directory of this cluster's checkpoints (shared by every "
              "server: each writes its shard there, shard 0 commits). Empty: "
              "no checkpoints.");
DEFINE_string(disk_tier_dir, "",
              "Folder of the disk tier: EXACT tables with when_full: "
              "WHEN_FULL_MOVE_TO_DISK keep the rows beyond their memory bound "
              "(capacity) there, under shard-S/table-ID. Scratch, not a "
              "checkpoint: emptied at start (restore from --checkpoint_dir). "
              "Required by such tables; unused by others.");
DEFINE_int32(disk_tier_read_threads,
             ps::table::RocksDbColdRowStore::kDefaultReadThreads,
             "Threads a pull's reads of each disk-tier table's store run on, "
             "each sending its reads to the disk in io_uring batches (a disk "
             "serves many reads at once several times faster than one at a "
             "time). In [1, 256].");
DEFINE_uint64(disk_tier_memory_mib, 0,
              "The most memory, in MiB, the rows kept in memory (values and "
              "optimizer state) of this server's tables with a disk tier may "
              "take together: when their capacities ask for more, each "
              "table's capacity is scaled down in proportion (logged at "
              "start). 0: the tables' capacities decide.");
DEFINE_uint64(checkpoint_every_steps, 0,
              "Workers take a checkpoint at every step that is a multiple of "
              "this (a consistent cut at a step boundary); 0: off.");
DEFINE_uint64(checkpoint_every_secs, 0,
              "Workers take a checkpoint at the first step boundary at least "
              "this many seconds after the last one; 0: off.");
DEFINE_uint32(checkpoint_keep, 3,
              "Complete checkpoints kept (with the parents incremental ones "
              "need); older ones are deleted by shard 0. 0: keep all.");
DEFINE_uint32(checkpoint_full_every, 5,
              "Every Nth checkpoint is full; the others hold only the rows "
              "changed since the previous one. 1: always full.");
DEFINE_bool(checkpoint_on_exit, true,
            "With --checkpoint_dir: write a final checkpoint after draining "
            "on SIGTERM/SIGINT/Shutdown (it records no worker positions).");
DEFINE_string(restore_from, "",
              "Restore the shard before serving: 'latest' (the newest complete "
              "checkpoint under --checkpoint_dir), 'best' (the one ps_worker "
              "--early_stop marked best there, kept past --checkpoint_keep) "
              "or a checkpoint directory; "
              "any number of shards may have written it. Empty: start fresh.");
DEFINE_bool(restore_fallback, false,
            "With --restore_from=latest: when the newest checkpoint is "
            "damaged on any shard, every shard restores the previous complete "
            "one instead of failing (the shards agree: all restore the same "
            "checkpoint, or none starts).");
DEFINE_uint32(restore_wait_secs, 300,
              "Restoring with several shards: how long a shard waits for the "
              "others to start and say whether they restored the same "
              "checkpoint (they find each other through --checkpoint_dir).");
DEFINE_uint64(test_hold_checkpoint_step, 0,
              "Tests only: the background write of the checkpoint of this "
              "step stops half-way (logging 'test hold: checkpoint step S') "
              "so that a crash test can kill -9 the server mid-write.");
DEFINE_int32(metrics_port, -1,
             "Serve Prometheus metrics (text format) at "
             "http://<--metrics_host>:PORT/metrics: packets, rows and bytes "
             "applied and rejected per worker, inbox occupancy, apply-thread "
             "busy time, EXACT tables, checkpoints, process CPU and RSS (see "
             "README, Metrics). 0 picks a free port (logged); -1: off.");
DEFINE_string(metrics_host, "127.0.0.1", ps::metrics::kMetricsHostHelp);

namespace {

constexpr int kExitBadConfig = 2;
constexpr int kExitRuntime = 1;

ps::StatusOr<ps::server::ServerOptions> OptionsFromFlags() {
  ps::server::ServerOptions o;
  if (FLAGS_tables.empty()) {
    return ps::InvalidArgument("--tables is required (a TableConfig file)");
  }
  PS_ASSIGN_OR_RETURN(o.tables, ps::protocol::LoadTableConfig(FLAGS_tables));
  auto port = [](const char* name, int32_t v) -> ps::StatusOr<uint16_t> {
    if (v < 0 || v > 65535) {
      return ps::InvalidArgument(std::string("--") + name +
                                 " must be in [0, 65535], not " +
                                 std::to_string(v));
    }
    return static_cast<uint16_t>(v);
  };
  PS_ASSIGN_OR_RETURN(o.port, port("port", FLAGS_port));
  PS_ASSIGN_OR_RETURN(o.xfer.listen_port, port("xfer_port", FLAGS_xfer_port));
  o.shard_id = FLAGS_shard_id;
  o.num_shards = FLAGS_num_shards;
  o.num_workers = FLAGS_num_workers;
  o.xfer.listen_host = FLAGS_listen_host;
  o.xfer.advertise_host = FLAGS_advertise_host;
  // Runs before main() starts any thread (it writes to the environment).
  PS_ASSIGN_OR_RETURN(o.xfer.secret, ps::xfer::ClusterSecret::ResolveForProgram(
                                         FLAGS_cluster_secret_file, environ));
  o.xfer.peer_timeout_ms = FLAGS_timeout_ms;
  o.max_control_connections = FLAGS_max_control_connections;
  o.apply.threads = FLAGS_apply_threads;
  o.apply.idle.spin_us = FLAGS_idle_spin_us;
  o.apply.idle.sleep_min_us = FLAGS_idle_sleep_min_us;
  o.apply.idle.sleep_max_us = FLAGS_idle_sleep_max_us;
  auto consistency = ps::protocol::ConsistencyFromName(FLAGS_consistency);
  if (!consistency.ok() || *consistency == ps::proto::CONSISTENCY_UNSET) {
    return ps::InvalidArgument(
        "--consistency must be async, bsp or ssp, not '" + FLAGS_consistency +
        "'");
  }
  o.consistency = *consistency;
  o.staleness = FLAGS_staleness;
  auto transport = ps::xfer::TransportChoiceFromName(FLAGS_transport);
  if (!transport.ok()) return transport.status().WithContext("--transport");
  o.xfer.transport = *transport;
  PS_ASSIGN_OR_RETURN(o.xfer,
                      ps::xfer::ApplyEnvironment(std::move(o.xfer), environ));
  PS_RETURN_IF_ERROR(ps::cli::CheckIntFlag(
      "cpu_wakeup_latency_us", FLAGS_cpu_wakeup_latency_us, -1, 1000000));
  o.xfer.cpu_wakeup_latency_us = FLAGS_cpu_wakeup_latency_us;
  PS_ASSIGN_OR_RETURN(o.device, ps::server::ParseDeviceOption(FLAGS_device));
  o.inbox_slots = FLAGS_inbox_slots;
  o.slot_bytes = FLAGS_slot_bytes;
  o.keys_in_hash_order = FLAGS_keys_in_hash_order;
  o.checkpoint.dir = FLAGS_checkpoint_dir;
  PS_RETURN_IF_ERROR(ps::cli::CheckIntFlag(
      "disk_tier_read_threads", FLAGS_disk_tier_read_threads, 1, 256));
  if (FLAGS_disk_tier_memory_mib > (uint64_t{1} << 30)) {
    return ps::InvalidArgument(
        "--disk_tier_memory_mib must be at most 2^30 (1 EiB), not " +
        std::to_string(FLAGS_disk_tier_memory_mib));
  }
  o.disk_tier = {.dir = FLAGS_disk_tier_dir,
                 .read_threads = FLAGS_disk_tier_read_threads,
                 .memory_budget_bytes = FLAGS_disk_tier_memory_mib << 20};
  o.version = std::string(ps::cli::Version());
  o.checkpoint.every_steps = FLAGS_checkpoint_every_steps;
  o.checkpoint.every_secs = FLAGS_checkpoint_every_secs;
  o.checkpoint.keep = FLAGS_checkpoint_keep;
  o.checkpoint.full_every = FLAGS_checkpoint_full_every;
  o.checkpoint.final_on_stop = FLAGS_checkpoint_on_exit;
  o.checkpoint.restore_from = FLAGS_restore_from;
  o.checkpoint.restore_fallback = FLAGS_restore_fallback;
  o.checkpoint.restore_wait_secs = FLAGS_restore_wait_secs;
  o.checkpoint.timeout_ms = FLAGS_timeout_ms;
  o.checkpoint.test_hold_step = FLAGS_test_hold_checkpoint_step;
  PS_RETURN_IF_ERROR(ps::server::ValidateServerOptions(o));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "serves one shard of the parameter-server tables.\n"
      "  ps_server --tables=FILE [--shard_id=S --num_shards=N "
      "--num_workers=W --port=P --port_file=F ...]\n"
      "Stops cleanly (drains inboxes, logs final stats, exit 0) on SIGTERM, "
      "SIGINT or a Shutdown control request, within seconds: waits on other "
      "shards are cut short; with --checkpoint_on_exit a final checkpoint is "
      "written first, and a second signal gives up its waits too.\n"
      "After a crash (a server killed or lost; its workers exit with status "
      "3): stop the other servers (SIGTERM; a final checkpoint that cannot "
      "complete is abandoned), restart every server with the same flags plus "
      "--restore_from=latest "
      "(all shards go back to the newest complete checkpoint, a consistent "
      "cut; an interrupted one is never used), then restart the workers: "
      "they resume at the checkpoint's step and data position.");
  // With TZ unset, glibc re-reads the zone (free + strdup of its name) on
  // every localtime call glog makes, racing between logging threads (TSan
  // reports it: the lock is inside libc). Naming the default zone
  // explicitly gives the same times and makes later calls a string compare.
  if (getenv("TZ") == nullptr) setenv("TZ", ":/etc/localtime", 0);
  // gflags exits with 1 on an unknown flag or a bad value; we promise 2.
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    std::fprintf(stderr, "ps_server: %s\n", s.message().c_str());
    return kExitBadConfig;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_log_dir.empty()) FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1] << "' (see --help)";
    return kExitBadConfig;
  }

  // Block the stop signals in every thread (the threads started below
  // inherit the mask); one thread takes them with sigtimedwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (FLAGS_metrics_port < -1 || FLAGS_metrics_port > 65535) {
    LOG(ERROR) << "--metrics_port must be -1 (off) or in [0, 65535], not "
               << FLAGS_metrics_port;
    return kExitBadConfig;
  }
  if (FLAGS_metrics_port >= 0) {
    if (ps::Status h = ps::metrics::CheckHost(FLAGS_metrics_host); !h.ok()) {
      LOG(ERROR) << "--metrics_host: " << h.message();
      return kExitBadConfig;
    }
  }
  auto options = OptionsFromFlags();
  if (!options.ok()) {
    LOG(ERROR) << options.status();
    return kExitBadConfig;
  }
  auto server = ps::server::Server::Create(std::move(*options));
  if (!server.ok()) {
    LOG(ERROR) << "cannot start: " << server.status();
    return server.status().Is(ps::StatusCode::kInvalidArgument) ? kExitBadConfig
                                                                : kExitRuntime;
  }
  ps::server::Server* s = server->get();
  // Signals from here on: the first stops the server (also a restore that
  // waits for the other shards), a second gives up the final checkpoint's
  // waits.
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    const timespec tick{0, 100 * 1000 * 1000};
    while (!done.load(std::memory_order_acquire)) {
      int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig > 0) {
        LOG(INFO) << "received " << strsignal(sig) << ": stopping";
        s->RequestStop();
      }
    }
  });
  auto stop_signal_thread = [&] {
    done.store(true, std::memory_order_release);
    signal_thread.join();
  };
  if (ps::Status started = s->Start(); !started.ok()) {
    LOG(ERROR) << "cannot start: " << started;
    stop_signal_thread();
    server->reset();
    return started.Is(ps::StatusCode::kCancelled) ? 0 : kExitRuntime;
  }
  // Declared after the server, reset before it: no scrape outlives it.
  ps::metrics::Registry metrics_registry;
  std::unique_ptr<ps::metrics::Exporter> metrics_exporter;
  if (FLAGS_metrics_port >= 0) {
    s->AddMetrics(&metrics_registry);
    ps::metrics::AddProcessCollector(&metrics_registry);
    auto exporter = ps::metrics::Exporter::Start(
        &metrics_registry, FLAGS_metrics_host, FLAGS_metrics_port);
    if (!exporter.ok()) {
      LOG(ERROR) << "--metrics_port: " << exporter.status();
      s->RequestStop();
      s->Run(0);
      stop_signal_thread();
      return kExitRuntime;
    }
    metrics_exporter = std::move(*exporter);
    LOG(INFO) << "metrics: " << metrics_exporter->url();
  }
  if (!FLAGS_port_file.empty()) {
    ps::Status w =
        ps::cli::WritePortFile(FLAGS_port_file, s->control_address());
    if (!w.ok()) {
      LOG(ERROR) << "--port_file: " << w;
      s->RequestStop();
      s->Run(0);
      stop_signal_thread();
      return kExitRuntime;
    }
  }
  LOG(INFO) << "ready: control " << s->control_address();
  s->Run(FLAGS_stats_every_secs);
  metrics_exporter.reset();
  stop_signal_thread();
  server->reset();
  LOG(INFO) << "exited cleanly";
  return 0;
}
