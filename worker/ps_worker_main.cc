// ps_worker: trains a CTR model (logistic regression, factorization machine
// or DeepFM) on click logs, with the parameters on the parameter servers
// (--servers) or in this process (--local), and reports eval AUC, logloss and
// normalized entropy. Early stopping: ps_worker_early_stop.h; its part in
// the servers' cuts: ps_worker_checkpoints.h.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/guarded_main.h"
#include "client/checkpoint_sync.h"
#include "client/ps_client.h"
#include "core/context_environment.h"
#include "core/transport_name.h"
#include "metrics/exporter.h"
#include "protocol/table_config.h"
#include "worker/ps_worker_admission.h"
#include "worker/ps_worker_checkpoints.h"
#include "worker/ps_worker_data.h"
#include "worker/ps_worker_early_stop.h"
#include "worker/ps_worker_metrics.h"
#include "worker/train/local_param_store.h"
#include "worker/train/metered_param_store.h"
#include "worker/train/metrics_out.h"
#include "worker/train/model.h"
#include "worker/train/ps_param_store.h"
#include "worker/train/trainer.h"

DEFINE_string(model, "lr",
              "Model: 'lr' (logistic regression), 'fm' (factorization "
              "machine) or 'deepfm' (FM plus an MLP on the field embeddings).");
DEFINE_string(train_data, "",
              "Training file (required), plain text or gzip (detected from "
              "the content).");
DEFINE_string(eval_data, "",
              "Evaluation file. Empty: every --holdout_every-th line of "
              "--train_data (chosen by --seed) is held out instead.");
DEFINE_bool(strict_data, false,
            "Stop at the first malformed line instead of skipping and "
            "counting it.");
DEFINE_uint32(epochs, 1, "Passes over the training data.");
DEFINE_uint32(batch_size, 1000,
              "Examples per training step across the job: each of "
              "--num_workers workers takes ceil(batch_size / num_workers) "
              "of them per pull/push, so N workers in bsp make the updates "
              "--local makes (the gradients are sums over examples). In [1, "
              "1000000]; --threads x this worker's share at most 4000000 "
              "(every thread holds its batch, its rows and gradients).");
DEFINE_uint32(threads, 1,
              "Training threads in this worker, in [1, 256]; each pulls, "
              "computes and pushes its own mini-batches.");
DEFINE_bool(local, false,
            "Keep the parameters in this process (needs --tables) instead "
            "of on the servers: the reference a distributed run is compared "
            "with.");
DEFINE_bool(eval_only, false,
            "Train nothing: score --eval_data (or the held-out split) with "
            "the parameters the servers hold now, e.g. after they restarted "
            "with --restore_from, print the eval line and exit.");
DEFINE_string(servers, "",
              "Comma-separated control addresses (host:port) of the "
              "servers, in shard order (not with --local).");
DEFINE_string(tables, "",
              "Table config (text-format TableConfig, the file the servers "
              "load); required with --local, otherwise the servers' tables "
              "are used.");
DEFINE_uint32(worker_id, 0,
              "This worker's index in [0, --num_workers); it trains on lines "
              "i with i % num_workers == worker_id.");
DEFINE_uint32(num_workers, 1,
              "Workers in the job, in [1, 65536] (as ps_server allows).");
DEFINE_string(transport, "auto",
              "Data path to the servers: 'auto' (shm with a server on this "
              "kernel and in its network and IPC namespaces, else tcp), "
              "'shm' or 'tcp'. With auto, $XFER_TRANSPORT decides when set "
              "(as ps_server's --transport says).");
DEFINE_int32(cpu_wakeup_latency_us, -1,
             "While running, ask the kernel to wake every CPU of this machine "
             "within this many microseconds (as ps_server's flag; needs "
             "root); -1: leave the machine as it is.");
DEFINE_string(listen_host, "127.0.0.1",
              "Address this worker's own transfer listener binds (no server "
              "dials it): one address, or 0.0.0.0 / ::.");
DEFINE_string(advertise_host, "",
              "Address that listener names; empty: --listen_host, or for a "
              "wildcard this host's first non-loopback address.");
DEFINE_int32(timeout_ms, 30000,
             "A server unreachable this long counts as lost (exit 3); shorter "
             "outages are ridden out, broken connections re-established. "
             "Also the deadline of every control call.");
DEFINE_string(cluster_secret_file, "",
              "File holding the cluster's shared secret, the one the servers "
              "have (owned by this user or root, chmod 600, group read "
              "allowed; see ps_server --help). Empty: "
              "$PS_CLUSTER_SECRET_FILE, else $PS_CLUSTER_SECRET (wiped from "
              "this process's environment at start), else none.");
DEFINE_uint32(max_failed_checkpoints, 3,
              "Stop (exit status 4) when this many checkpoints in a row "
              "failed, so that no more training is lost than that; each "
              "failure is a warning. 0: never stop.");
DEFINE_string(metrics_json, "",
              "If set, write the final metrics here as JSON.");
DEFINE_string(metrics_out, "",
              "If set, append the training curves here as JSON lines while "
              "training: a line per progress point (examples, samples/s, "
              "train loss and AUC; every --progress_secs, every second "
              "when progress lines are off) and per eval point (eval AUC, "
              "logloss, NE). scripts/plot_metrics.sh FILE draws them.");
DEFINE_int32(metrics_port, -1,
             "Serve Prometheus metrics (text format) at "
             "http://<--metrics_host>:PORT/metrics while training: examples, "
             "loss, samples/s, training and eval AUC, logloss and NE, push "
             "and pull latency histograms, keys and bytes per table, process "
             "CPU and RSS (see README, Metrics). 0 picks a free port "
             "(logged); -1: off.");
DEFINE_string(metrics_host, "127.0.0.1", ps::metrics::kMetricsHostHelp);
DEFINE_uint64(seed, 1, "Seed of the held-out split.");
DEFINE_uint32(holdout_every, 10,
              "Without --eval_data: hold out one line in this many.");
DEFINE_uint64(eval_every, 0,
              "Also evaluate every this many training examples of this "
              "worker (0: only after each epoch and at the end). Each eval "
              "line gives AUC, logloss and NE (normalized entropy: logloss "
              "over the base rate's entropy; NE >= 1, no better than "
              "predicting the base rate, is warned about loudly).");
DEFINE_int32(eval_worker, 0,
             "The worker that evaluates (the others only train), in [0, "
             "--num_workers); -1: every worker evaluates.");
DEFINE_uint32(fm_dim, 8,
              "Factor length k of fm and deepfm (rows are 1+k), in [1, 256].");
DEFINE_uint32(num_fields, 39,
              "deepfm: fields of the MLP input (39 for criteo; libsvm "
              "features are all field 0; a csv log's feature columns by "
              "default, unless --train_data is a pipe), in [1, 1024]; "
              "num_fields x fm_dim (the MLP's input) "
              "at most 65536.");
DEFINE_string(hidden, "64,32",
              "deepfm: MLP hidden layer widths, each in [1, 4096], at most 16 "
              "layers and 64M weights; this worker's batch x (input + hidden "
              "widths) at most 256M activations per thread.");
DEFINE_double(l2_w, 0,
              "L2 strength on the linear weight of each sparse row a batch "
              "uses (added once per step: lambda * w; N workers each add "
              "lambda / N for the rows of their share), in [0, 1e6].");
DEFINE_double(l2_v, 0,
              "L2 strength on the FM factors of each sparse row a batch uses "
              "(fm, deepfm), per step as --l2_w: keeps rare features' "
              "factors from fitting noise. In [0, 1e6].");
DEFINE_string(sparse_table, "emb", "Name of the model's hashed table.");
DEFINE_string(dense_table, "mlp", "Name of deepfm's dense MLP table.");
DEFINE_double(progress_secs, -1,
              "Seconds between progress lines (0: none; default 1 on a "
              "terminal, 10 otherwise).");

namespace {

// Usage errors exit 2, failures while running exit 1 (a diverged run
// among them), a lost server exits kExitServerLost (the cluster must be
// restarted from a checkpoint), also when it shows as a timeout.
constexpr int kExitUsage = 2;
constexpr int kExitServerLost = 3;
constexpr int kExitCheckpointsFailing = 4;

// Bounds of the flags that size what each thread allocates (see their
// --help): far above any useful setting, far below what ends in bad_alloc.
constexpr uint32_t kMaxBatch = 1000000;
constexpr uint32_t kMaxThreads = 256;
constexpr uint64_t kMaxExamplesInFlight = 4000000;  // threads x batch
constexpr uint32_t kMaxWorkers = 65536;
constexpr uint32_t kMaxHiddenLayers = 16;
constexpr uint64_t kMaxActivations = uint64_t{1} << 28;  // per thread
constexpr double kMaxL2 = 1e6;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "ps_worker: %s\n", message.c_str());
  return code;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The flags on their own, before anything is allocated or opened; the
// ones that depend on others (the per-worker batch, deepfm's activations)
// are checked where those are known.
ps::Status CheckFlags() {
  using ps::cli::CheckRealFlag;
  using ps::cli::CheckUintFlag;
  PS_RETURN_IF_ERROR(CheckUintFlag("epochs", FLAGS_epochs, 1, UINT32_MAX));
  PS_RETURN_IF_ERROR(CheckUintFlag(
      "batch_size", FLAGS_batch_size, 1, kMaxBatch,
      "every training thread holds a batch with its rows and gradients"));
  PS_RETURN_IF_ERROR(CheckUintFlag("threads", FLAGS_threads, 1, kMaxThreads));
  PS_RETURN_IF_ERROR(ps::cli::CheckIntFlag(
      "cpu_wakeup_latency_us", FLAGS_cpu_wakeup_latency_us, -1, 1000000));
  PS_RETURN_IF_ERROR(ps::cli::CheckIntFlag(
      "timeout_ms", FLAGS_timeout_ms, 1000, 24 * 3600 * 1000,
      "servers send keepalives every 250 ms during long calls"));
  PS_RETURN_IF_ERROR(
      CheckUintFlag("num_workers", FLAGS_num_workers, 1, kMaxWorkers));
  PS_RETURN_IF_ERROR(CheckUintFlag("worker_id", FLAGS_worker_id, 0,
                                   FLAGS_num_workers - 1,
                                   "a worker's index is below --num_workers"));
  // Any other index names no worker of the job: it would train to the end
  // and finish without anyone evaluating.
  if (FLAGS_eval_worker != -1 &&
      (FLAGS_eval_worker < 0 ||
       static_cast<uint32_t>(FLAGS_eval_worker) >= FLAGS_num_workers)) {
    return ps::InvalidArgument(
        "--eval_worker must be -1 (every worker evaluates) or a worker in "
        "[0, " +
        std::to_string(FLAGS_num_workers) +
        ") (--num_workers=" + std::to_string(FLAGS_num_workers) + "), not " +
        std::to_string(FLAGS_eval_worker));
  }
  PS_RETURN_IF_ERROR(ps::worker::CheckAdmissionFlags());
  PS_RETURN_IF_ERROR(CheckRealFlag("l2_w", FLAGS_l2_w, 0, kMaxL2));
  PS_RETURN_IF_ERROR(CheckRealFlag("l2_v", FLAGS_l2_v, 0, kMaxL2));
  if (std::isnan(FLAGS_progress_secs)) {
    return ps::InvalidArgument(
        "--progress_secs must be a number of seconds (negative: the "
        "default), not nan");
  }
  return ps::worker_main::CheckEarlyStopFlags(FLAGS_local);
}

// --hidden as widths, each checked before it can size a layer.
ps::StatusOr<std::vector<uint32_t>> HiddenWidths() {
  std::vector<uint32_t> widths;
  for (const std::string& h : Split(FLAGS_hidden)) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(h.c_str(), &end, 10);
    if (end == h.c_str() || *end != '\0' || errno == ERANGE || v < 1 ||
        v > ps::train::kMaxHiddenWidth) {
      return ps::InvalidArgument("--hidden wants widths in [1, " +
                                 std::to_string(ps::train::kMaxHiddenWidth) +
                                 "] like 64,32, not '" + FLAGS_hidden + "'");
    }
    widths.push_back(static_cast<uint32_t>(v));
  }
  if (widths.size() > kMaxHiddenLayers) {
    return ps::InvalidArgument("--hidden: at most " +
                               std::to_string(kMaxHiddenLayers) +
                               " layers, not " + std::to_string(widths.size()));
  }
  return widths;
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "trains a CTR model and reports eval AUC, logloss and NE.\n"
      "  ps_worker --flagfile=configs/fm.flags --train_data=train.tsv "
      "--eval_data=eval.tsv --servers=127.0.0.1:7000,127.0.0.1:7001\n"
      "  ps_worker --flagfile=configs/fm.flags --local "
      "--tables=configs/fm.tables --train_data=train.tsv\n"
      "Checkpoints are configured on the servers (ps_server "
      "--checkpoint_dir, --checkpoint_every_steps/_secs); the workers take "
      "part in each cut and record their data position in it. After a "
      "restart with ps_server --restore_from=latest a worker resumes at the "
      "restored step and position (the rest of the interrupted epoch, "
      "without repeating or skipping lines).\n"
      "Exit status: 0 done, 1 failed (also when training diverges: a loss "
      "or prediction that is not finite), 2 bad usage, 3 a server was lost "
      "(crashed or unreachable; or --timeout_ms passed waiting for the "
      "others), 4 --max_failed_checkpoints checkpoints in a row failed (a "
      "full disk?). Recovery from 3: stop the remaining "
      "servers and workers, restart every server with "
      "--restore_from=latest (all shards return to the same checkpoint), "
      "then restart every worker with the same flags.");
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    return Fail(kExitUsage, "unexpected argument '" + std::string(argv[1]) +
                                "' (see --help)");
  }
  if (ps::Status s = CheckFlags(); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  // Before any thread starts (the metrics exporter's, the trainer's): this
  // writes to the environment. Its error matters only with --servers.
  auto secret = ps::xfer::ClusterSecret::ResolveForProgram(
      FLAGS_cluster_secret_file, environ);
  if (FLAGS_metrics_port < -1 || FLAGS_metrics_port > 65535) {
    return Fail(kExitUsage,
                "--metrics_port must be -1 (off) or in [0, 65535], not " +
                    std::to_string(FLAGS_metrics_port));
  }
  std::unique_ptr<ps::worker_main::WorkerMetrics> metrics;
  if (FLAGS_metrics_port >= 0) {
    if (ps::Status h = ps::metrics::CheckHost(FLAGS_metrics_host); !h.ok()) {
      return Fail(kExitUsage, "--metrics_host: " + h.message());
    }
    auto m = ps::worker_main::WorkerMetrics::Start(
        FLAGS_metrics_host, FLAGS_metrics_port, FLAGS_worker_id);
    if (!m.ok()) return Fail(1, "--metrics_port: " + m.status().ToString());
    metrics = std::move(*m);
  }

  if (FLAGS_train_data.empty()) return Fail(2, "--train_data is required");
  auto data_flags = ps::worker::ResolveDataFlags(FLAGS_train_data);
  if (!data_flags.ok()) {
    const bool usage =
        data_flags.status().code() == ps::StatusCode::kInvalidArgument;
    return Fail(usage ? kExitUsage : 1, data_flags.status().ToString());
  }

  ps::train::ModelOptions mo;
  mo.name = FLAGS_model;
  mo.fm_dim = FLAGS_fm_dim;
  mo.num_fields = FLAGS_num_fields;
  if (data_flags->csv_fields && FLAGS_model == "deepfm") {
    const uint32_t fields = *data_flags->csv_fields;
    if (!gflags::GetCommandLineFlagInfoOrDie("num_fields").is_default &&
        FLAGS_num_fields != fields) {
      return Fail(kExitUsage,
                  "--num_fields=" + std::to_string(FLAGS_num_fields) +
                      ", but " + FLAGS_train_data + " has " +
                      std::to_string(fields) +
                      " feature columns (--csv_columns)");
    }
    mo.num_fields = fields;
  }
  mo.l2.w = static_cast<float>(FLAGS_l2_w);
  mo.l2.v = static_cast<float>(FLAGS_l2_v);
  if (!FLAGS_local && FLAGS_num_workers > 1) {
    // The L2 of a step, like its batch, is shared among the workers.
    mo.l2 = ps::train::L2ShareOfStep(mo.l2, FLAGS_num_workers);
    if (mo.l2.w > 0 || mo.l2.v > 0) {
      LOG(INFO) << "L2 per push: w " << mo.l2.w << ", v " << mo.l2.v << " ("
                << FLAGS_l2_w << " and " << FLAGS_l2_v << " per step over "
                << FLAGS_num_workers << " workers)";
    }
  }
  auto hidden = HiddenWidths();
  if (!hidden.ok()) return Fail(kExitUsage, hidden.status().message());
  mo.hidden = *hidden;
  auto model = ps::train::MakeModel(mo);
  if (!model.ok()) return Fail(2, model.status().message());

  ps::train::TrainerOptions to;
  to.train_data = FLAGS_train_data;
  to.eval_data = FLAGS_eval_data;
  to.format = data_flags->format;
  to.csv_spec = data_flags->csv_spec;
  to.strict_data = FLAGS_strict_data;
  to.epochs = FLAGS_epochs;
  to.batch_size = FLAGS_batch_size;
  to.threads = FLAGS_threads;
  to.worker_id = FLAGS_worker_id;
  to.num_workers = FLAGS_num_workers;
  if (!FLAGS_local && to.num_workers > 1) {
    // A global batch: with a per-worker batch N workers would take 1/N the
    // steps of --local per epoch, each over N times the examples.
    to.batch_size = (to.batch_size + to.num_workers - 1) / to.num_workers;
    LOG(INFO) << "mini-batch " << to.batch_size << " examples per worker ("
              << FLAGS_batch_size << " per step over " << to.num_workers
              << " workers)";
  }
  if (uint64_t{to.batch_size} * to.threads > kMaxExamplesInFlight) {
    return Fail(kExitUsage,
                "--threads x --batch_size (this worker's share, " +
                    std::to_string(to.batch_size) + ") must be at most " +
                    std::to_string(kMaxExamplesInFlight) +
                    " examples in memory at once, not " +
                    std::to_string(uint64_t{to.batch_size} * to.threads));
  }
  if (FLAGS_model == "deepfm") {
    // Every thread keeps each layer's activations for its whole batch.
    uint64_t per_example = uint64_t{mo.num_fields} * mo.fm_dim + 1;
    for (uint32_t h : mo.hidden) per_example += h;
    if (per_example * to.batch_size > kMaxActivations) {
      return Fail(kExitUsage,
                  "deepfm: this worker's batch (" +
                      std::to_string(to.batch_size) + ") x " +
                      std::to_string(per_example) +
                      " activations per example (--num_fields x --fm_dim "
                      "plus --hidden) must be at most " +
                      std::to_string(kMaxActivations) +
                      " floats per thread; lower --batch_size");
    }
  }
  to.seed = FLAGS_seed;
  to.holdout_every = FLAGS_holdout_every;
  if (to.eval_data.empty() && to.holdout_every < 2) {
    return Fail(2, "--holdout_every must be >= 2 without --eval_data");
  }
  to.eval_every = FLAGS_eval_every;
  ps::worker_main::ConfigureEarlyStop(&to);
  to.evaluate = FLAGS_eval_worker == -1 ||
                static_cast<uint32_t>(FLAGS_eval_worker) == to.worker_id;
  to.progress_in_place = isatty(STDERR_FILENO);
  to.progress_secs = FLAGS_progress_secs >= 0 ? FLAGS_progress_secs
                     : to.progress_in_place   ? 1.0
                                              : 10.0;
  to.sparse_table = FLAGS_sparse_table;
  to.dense_table = FLAGS_dense_table;
  to.admission_sketch_bytes = ps::worker::AdmissionSketchBytes();
  if (!FLAGS_metrics_out.empty()) {
    auto metrics = ps::train::MetricsOut::Open(FLAGS_metrics_out, to.worker_id);
    if (!metrics.ok()) return Fail(1, metrics.status().message());
    to.metrics_out = std::move(*metrics);
  }

  std::unique_ptr<ps::train::ParamStore> store;
  std::unique_ptr<ps::worker::CheckpointSync> checkpoint_sync;
  bool checkpoints_failing = false;
  if (FLAGS_local) {
    if (!FLAGS_servers.empty())
      return Fail(2, "--local and --servers exclude each other");
    if (FLAGS_tables.empty()) return Fail(2, "--local needs --tables");
    auto config = ps::protocol::LoadTableConfig(FLAGS_tables);
    if (!config.ok()) return Fail(2, "--tables: " + config.status().ToString());
    auto local = ps::train::LocalParamStore::Create(*config);
    if (!local.ok()) return Fail(2, "--tables: " + local.status().ToString());
    ps::worker_main::ConfigureLocalEarlyStop(local->get(), &to);
    store = std::move(*local);
  } else {
    ps::worker::PsClient::Options co;
    co.servers = Split(FLAGS_servers);
    if (co.servers.empty()) {
      return Fail(2, "give --servers=host:port,... or --local");
    }
    co.worker_id = to.worker_id;
    co.num_workers = to.num_workers;
    co.xfer.peer_timeout_ms = FLAGS_timeout_ms;
    co.xfer.listen_host = FLAGS_listen_host;
    co.xfer.advertise_host = FLAGS_advertise_host;
    if (!secret.ok()) return Fail(kExitUsage, secret.status().ToString());
    co.xfer.secret = std::move(*secret);
    auto transport = ps::xfer::TransportChoiceFromName(FLAGS_transport);
    if (!transport.ok()) {
      return Fail(2, "--transport " + transport.status().message());
    }
    co.xfer.transport = *transport;
    auto with_environment =
        ps::xfer::ApplyEnvironment(std::move(co.xfer), environ);
    if (!with_environment.ok()) {
      return Fail(kExitUsage, with_environment.status().ToString());
    }
    co.xfer = std::move(*with_environment);
    co.xfer.cpu_wakeup_latency_us = FLAGS_cpu_wakeup_latency_us;
    if (metrics != nullptr) {
      co.counters =
          metrics->MakeClientCounters(static_cast<uint32_t>(co.servers.size()));
    }
    auto client = ps::worker::PsClient::Connect(co);
    if (!client.ok()) {
      return Fail(1, "cannot reach the servers (" + FLAGS_servers +
                         "): " + client.status().ToString());
    }
    auto owned = std::make_unique<ps::train::PsParamStore>(std::move(*client));
    ps::train::PsParamStore* ps_store = owned.get();
    store = std::move(owned);
    auto sync = ps::worker::CheckpointSync::Create(ps_store->client());
    if (!sync.ok()) {
      return Fail(
          1, "checkpoint info from the servers: " + sync.status().ToString());
    }
    checkpoint_sync = std::move(*sync);
    auto info = checkpoint_sync->Info();
    if (!info.ok()) {
      return Fail(
          1, "checkpoint info from the servers: " + info.status().ToString());
    }
    if (info->restored()) {
      to.start_step = info->restored_step();
      to.start_epoch = static_cast<uint32_t>(info->epoch());
      to.start_consumed = info->examples_consumed();
      LOG(INFO) << "resumed from step " << to.start_step << ", epoch "
                << to.start_epoch + 1 << ", examples " << to.start_consumed
                << " of it consumed (checkpoint " << info->restored_from()
                << ")";
      if (to.start_epoch == 0 && to.start_consumed == 0) {
        LOG(WARNING) << "the checkpoint records no data position for worker "
                     << to.worker_id
                     << " (a final checkpoint a server wrote on stop?): "
                        "the data starts over from its first line";
      }
    }
    ps::worker::CheckpointSync* cs = checkpoint_sync.get();
    if (info->every_steps() > 0 || info->every_secs() > 0) {
      to.checkpoint_due = [cs](uint64_t step) { return cs->Due(step); };
      to.checkpoint = ps::worker_main::CheckpointCallback(
          cs, FLAGS_max_failed_checkpoints, &checkpoints_failing);
    }
    if (to.early_stop) {
      to.eval_cut = ps::worker_main::EvalCutCallback(
          cs, FLAGS_max_failed_checkpoints, &checkpoints_failing);
      ps::worker_main::ConfigureServerEarlyStop(*cs, &to);
    }
  }

  if (metrics != nullptr) {
    to.stats = metrics->stats();
    auto metered = ps::train::MeteredParamStore::Create(
        std::move(store), {FLAGS_sparse_table, FLAGS_dense_table},
        metrics->labels(), metrics->registry());
    if (!metered.ok()) return Fail(1, metered.status().ToString());
    store = std::move(*metered);
    metrics->NameTables(*store, {FLAGS_sparse_table, FLAGS_dense_table});
  }
  auto trainer = ps::train::Trainer::Create(to, model->get(), store.get());
  if (!trainer.ok()) return Fail(2, trainer.status().message());
  ps::Status admission = ps::worker::StartAdmission(&*trainer, FLAGS_eval_only);
  if (!admission.ok()) return Fail(1, admission.ToString());
  if (FLAGS_eval_only) {
    auto point = trainer->Evaluate(to.threads);
    if (!point.ok()) return Fail(1, point.status().ToString());
    std::printf("eval %s (%llu examples)\n",
                ps::train::EvalMetricsText(*point).c_str(),
                static_cast<unsigned long long>(point->examples));
    return 0;
  }
  auto result = trainer->Run();
  if (!result.ok() && checkpoints_failing) {
    return Fail(kExitCheckpointsFailing, result.status().ToString());
  }
  // A server that died shows as kPeerLost here, and as kTimeout on workers
  // that wait (BSP clock, barrier) for a worker stuck on it.
  if (!result.ok() && !FLAGS_local &&
      (result.status().code() == ps::StatusCode::kPeerLost ||
       result.status().code() == ps::StatusCode::kTimeout)) {
    return Fail(kExitServerLost,
                "lost a server (or a worker stuck on one): " +
                    result.status().ToString() +
                    "\nps_worker: recovery: restart every server with "
                    "--restore_from=latest, then every worker (exit status " +
                    std::to_string(kExitServerLost) + ")");
  }
  if (!result.ok()) return Fail(1, result.status().ToString());
  if (result->malformed_lines > 0) {
    std::fprintf(stderr, "ps_worker: skipped %llu malformed lines, e.g.\n",
                 static_cast<unsigned long long>(result->malformed_lines));
    for (const std::string& m : result->first_malformed) {
      std::fprintf(stderr, "  %s\n", m.c_str());
    }
  }
  if (!FLAGS_metrics_json.empty()) {
    std::ofstream json(FLAGS_metrics_json);
    json << ps::train::TrainResultJson(*result, FLAGS_model, FLAGS_local, to);
    if (!json) return Fail(1, "cannot write " + FLAGS_metrics_json);
  }
  std::printf("trained %llu examples in %.1f s (%.0f samples/s)\n",
              static_cast<unsigned long long>(result->train_examples),
              result->train_seconds, result->samples_per_sec);
  ps::worker::PrintAdmissionSummary(*trainer);
  if (result->evaluated) {
    ps::worker_main::PrintEarlyStopResult(
        *result, FLAGS_local,
        checkpoint_sync != nullptr && checkpoint_sync->servers_checkpoint());
    std::printf("eval %s\n",
                ps::train::EvalMetricsText(result->final_eval).c_str());
  } else {
    std::printf("training done; worker %d evaluates\n", FLAGS_eval_worker);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ps::cli::GuardedMain("ps_worker", [&] { return Main(argc, argv); });
}
