// ps_bench: push and pull throughput of workers against running ps_server
// processes, and the latency of training-sized pushes and pulls.
//
//   ps_bench --servers=127.0.0.1:7000 --table=bench1 --mode=both
//
// Keys are uniformly random uint64 feature ids (so a HASHED table sees
// duplicates only where the hash collides), values one float per dim. Every
// timed iteration draws new keys and new gradients first (not timed), so no
// cache of an earlier iteration (routing, rows, packets) can carry over.
//
// push, pull, both: one push / pull of --keys keys per iteration. A push is
// timed until the servers applied it (Push + WaitApplied: the figure counts
// keys the servers took in, like an acknowledged push of other parameter
// servers); the time of the Push call alone is printed too. With several
// workers (ps_launch --workers=N), every worker runs this at the same time:
// a Barrier lines them up before each iteration and ends it (a Barrier waits
// until every worker's pushes are applied), and the figure is the cluster's,
// N x --keys per iteration time. Prints the median over --iterations, after
// one warm-up iteration, in M keys/s and GB/s (GB/s counts the keys' values,
// keys * dim * 4 bytes).
//
// resident: one set of --keys keys, pushed once into the table (timed
// until applied: "insert", each key gets a row of an EXACT table), then
// pulled and checked (the share of keys whose row is what an SGD step from
// a zero row gives for the pushed gradient: "hit"), then --iterations
// timed pulls of the same keys ("pull_resident") and --iterations timed
// pushes to them ("push_resident"), medians. With several workers each
// pushes and pulls its own keys.
//
// train: --batches steps shaped like CTR training, each a Pull then a Push
// (+ WaitApplied) of --batch_examples x --example_keys keys; prints pushes
// per second (steps / time spent pushing), steps per second (steps / time
// spent pulling and pushing) and the p50 / p99 latency of one push and of
// one pull. Fresh random keys every step, or with --key_space
// ids drawn by --key_law: one power law (--zipf) or the fields of
// ps_datagen's --vocab=criteo layout (bench/criteo_keys.h), after a --fill
// pass if asked: what a table with a disk tier is measured on
// (scripts/bench_tiered.sh).
//
// --metrics_port: serve Prometheus metrics as ps_worker does (process CPU
// and RSS, push and pull latency histograms observed on every call), to
// measure what metrics cost (scripts/bench_ps.sh --metrics).
//
// Last, the peak resident memory (VmHWM) of this worker and of the servers
// whose pid files --server_pid_files names (same host only). One "RESULT"
// line per figure for scripts (scripts/bench_ps.sh).
#include <gflags/gflags.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/criteo_keys.h"
#include "bench/peak_rss.h"
#include "bench/zipf_keys.h"
#include "cli/flags.h"
#include "client/ps_client.h"
#include "core/context_environment.h"
#include "core/transport_name.h"
#include "metrics/exporter.h"
#include "metrics/process_collector.h"

DEFINE_string(servers, "127.0.0.1:7000",
              "Comma-separated control addresses of the servers, in shard "
              "order.");
DEFINE_uint64(keys, 10000000, "Keys per push / pull (push, pull, both).");
DEFINE_uint32(dim, 1, "Expected row dimension of --table (checked).");
DEFINE_string(table, "", "Table id or name (default: the first table).");
DEFINE_uint32(iterations, 5, "Timed iterations per mode (median reported).");
DEFINE_string(mode, "both",
              "push, pull, both (throughput of --keys-key operations of "
              "fresh keys), resident (insert, then pulls and pushes of the "
              "same keys: see the header) or train (latency of --batches "
              "training-sized steps).");
DEFINE_uint32(batches, 500,
              "train: timed steps (after --warmup_batches), each a Pull and "
              "a Push of one batch.");
DEFINE_uint32(warmup_batches, 20,
              "train: untimed steps before the timed ones, as those are. A "
              "table with a disk tier needs hundreds before its misses per "
              "step settle (see scripts/bench_tiered.sh).");
DEFINE_uint32(train_seconds, 0,
              "train: stop the timed steps once they have run this long "
              "(wall clock), even before --batches; 0: --batches only.");
DEFINE_uint32(batch_examples, 1000, "train: examples per batch.");
DEFINE_uint32(example_keys, 39, "train: keys per example (one per field).");
DEFINE_uint64(key_space, 0,
              "train: draw the keys from about this many ids, skewed as a "
              "click log's are (--key_law); 0: fresh random "
              "64-bit keys every step.");
DEFINE_string(key_law, "zipf",
              "train with --key_space: how ids are drawn. 'zipf': one power "
              "law over all --key_space ids (--zipf; bench/zipf_keys.h). "
              "'criteo': ps_datagen --vocab=criteo's 39 fields, key i of an "
              "example from field i (so --example_keys must be 39): 13 "
              "integer columns' log buckets and 26 categorical fields with "
              "the Criteo Kaggle log's cardinalities, scaled (as "
              "--vocab_scale does) to total --key_space ids, and their own "
              "exponents (bench/criteo_keys.h).");
DEFINE_double(zipf, 1.0,
              "train with --key_space --key_law=zipf: the exponent S of the "
              "ids' power law (id r drawn with weight r^-S; 0: uniform).");
DEFINE_bool(fill, false,
            "train with --key_space: first push every id once, in batches "
            "of the step's size (timed: RESULT mode=fill).");
DEFINE_string(server_pid_files, "",
              "Comma-separated pid files of servers on this host (ps_launch's "
              "RUN_DIR/server-<i>.pid) whose peak RSS to print at the end. "
              "Empty: only this worker's.");
DEFINE_string(transport, "auto",
              "auto, shm or tcp (xfer transport); with auto, "
              "$XFER_TRANSPORT decides when set.");
DEFINE_uint32(worker_id, 0, "This worker's id (also varies the keys).");
DEFINE_uint32(num_workers, 1,
              "Workers the servers expect; above 1 they run in lockstep "
              "(see above).");
DEFINE_uint64(seed, 1, "Seed of the random keys and gradients.");
DEFINE_int32(metrics_port, -1,
             "Serve Prometheus metrics on <--metrics_host>:PORT/metrics (0: "
             "a free port, logged; -1: off), observing every push and pull.");
DEFINE_string(metrics_host, "127.0.0.1", ps::metrics::kMetricsHostHelp);

namespace {

using Clock = std::chrono::steady_clock;

enum class Mode { kPush, kPull, kBoth, kResident, kTrain };

bool ParseMode(const std::string& name, Mode* mode) {
  static constexpr std::pair<std::string_view, Mode> kModes[] = {
      {"push", Mode::kPush},
      {"pull", Mode::kPull},
      {"both", Mode::kBoth},
      {"resident", Mode::kResident},
      {"train", Mode::kTrain}};
  for (const auto& [text, m] : kModes) {
    if (text == name) {
      *mode = m;
      return true;
    }
  }
  return false;
}

enum class KeyLaw { kZipf, kCriteo };

bool ParseKeyLaw(const std::string& name, KeyLaw* law) {
  if (name == "zipf") {
    *law = KeyLaw::kZipf;
  } else if (name == "criteo") {
    *law = KeyLaw::kCriteo;
  } else {
    return false;
  }
  return true;
}

// What every timed loop works with.
struct Bench {
  ps::worker::PsClient* client = nullptr;
  uint32_t table = 0;
  float learning_rate = 0;  // the table's sgd rate (resident's check)
  size_t dim = 1;
  uint32_t num_workers = 1;
  std::mt19937_64 rng;
  // --metrics_port: latency of every Push / Pull call (null: off).
  ps::metrics::Histogram* push_seconds = nullptr;
  ps::metrics::Histogram* pull_seconds = nullptr;
};

void Observe(ps::metrics::Histogram* h, double seconds) {
  if (h != nullptr) h->Observe(seconds);
}

// CPU seconds this process used (all threads): on a shared machine the
// wall time of an iteration also counts other processes' turns.
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The value at quantile q (0.5: the median) of v.
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size()));
  return v[std::min(i, v.size() - 1)];
}

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

int Fail(const std::string& what, const ps::Status& s) {
  std::fprintf(stderr, "ps_bench: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  return 1;
}

// Fresh keys and gradients (in [-2^-10, 2^-10), small enough that the rows
// stay bounded over any number of iterations).
void Draw(std::mt19937_64* rng, std::span<uint64_t> keys,
          std::span<float> grads) {
  for (auto& k : keys) k = (*rng)();
  for (auto& g : grads) {
    const int64_t bits = static_cast<int64_t>((*rng)() >> 40) - (1 << 23);
    g = static_cast<float>(bits) * 0x1p-33f;
  }
}

// Lines the workers up when there are several (a Barrier also waits until
// this worker's pushes are applied); nothing for one.
ps::Status Sync(const Bench& b) {
  return b.num_workers > 1 ? b.client->Barrier() : ps::Status::OK();
}

// The cluster's rate when every worker moved n keys in `seconds`.
struct Rate {
  double seconds, mkeys_per_s, gb_per_s;
};
Rate RateOf(const Bench& b, size_t n, double seconds) {
  const double total = static_cast<double>(n) * b.num_workers;
  const double bytes = total * static_cast<double>(b.dim * sizeof(float));
  return {seconds, total / seconds / 1e6, bytes / seconds / 1e9};
}

// The line scripts/bench_ps.sh reads.
void PrintResult(const char* mode, const Rate& r) {
  std::printf("RESULT mode=%s mkeys_per_s=%.2f gb_per_s=%.3f\n", mode,
              r.mkeys_per_s, r.gb_per_s);
}

int RunPush(Bench& b, size_t n) {
  std::vector<uint64_t> keys(n);
  std::vector<float> grads(n * b.dim);
  std::vector<double> applied, call, cpu;
  for (uint32_t it = 0; it <= FLAGS_iterations; ++it) {
    Draw(&b.rng, keys, grads);
    ps::Status s = Sync(b);
    if (!s.ok()) return Fail("barrier", s);
    const double c0 = CpuSeconds();
    auto t0 = Clock::now();
    s = b.client->Push(b.table, keys, grads);
    if (!s.ok()) return Fail("push", s);
    auto t1 = Clock::now();
    Observe(b.push_seconds, Seconds(t0, t1));
    s = b.num_workers > 1 ? b.client->Barrier() : b.client->WaitApplied();
    if (!s.ok()) return Fail("wait applied", s);
    auto t2 = Clock::now();
    if (it == 0) continue;  // warm-up: first-touch of buffers
    applied.push_back(Seconds(t0, t2));
    call.push_back(Seconds(t0, t1));
    cpu.push_back(CpuSeconds() - c0);
  }
  const Rate r = RateOf(b, n, Median(applied));
  std::printf(
      "push: median %.4f s = %.1f M keys/s, %.2f GB/s over %u worker(s) "
      "(this worker's Push call alone: %.1f M keys/s; its CPU %.3f s = %.1f "
      "M keys per CPU-second)\n",
      r.seconds, r.mkeys_per_s, r.gb_per_s, b.num_workers,
      n / Median(call) / 1e6, Median(cpu), n / Median(cpu) / 1e6);
  PrintResult("push", r);
  return 0;
}

int RunPull(Bench& b, size_t n) {
  std::vector<uint64_t> keys(n);
  std::vector<float> out(n * b.dim);
  std::vector<double> times, cpu;
  for (uint32_t it = 0; it <= FLAGS_iterations; ++it) {
    Draw(&b.rng, keys, {});
    ps::Status s = Sync(b);
    if (!s.ok()) return Fail("barrier", s);
    const double c0 = CpuSeconds();
    auto t0 = Clock::now();
    s = b.client->Pull(b.table, keys, out);
    if (!s.ok()) return Fail("pull", s);
    Observe(b.pull_seconds, Seconds(t0, Clock::now()));
    s = Sync(b);
    if (!s.ok()) return Fail("barrier", s);
    auto t1 = Clock::now();
    if (it == 0) continue;
    times.push_back(Seconds(t0, t1));
    cpu.push_back(CpuSeconds() - c0);
  }
  const Rate r = RateOf(b, n, Median(times));
  std::printf(
      "pull: median %.4f s = %.1f M keys/s, %.2f GB/s over %u worker(s) "
      "(this worker's CPU %.3f s over its threads)\n",
      r.seconds, r.mkeys_per_s, r.gb_per_s, b.num_workers, Median(cpu));
  PrintResult("pull", r);
  return 0;
}

// Push + WaitApplied (a Barrier with several workers) of keys and grads;
// the seconds it took.
ps::Status TimedPush(Bench& b, std::span<const uint64_t> keys,
                     std::span<const float> grads, double* seconds) {
  PS_RETURN_IF_ERROR(Sync(b));
  auto t0 = Clock::now();
  PS_RETURN_IF_ERROR(b.client->Push(b.table, keys, grads));
  PS_RETURN_IF_ERROR(b.num_workers > 1 ? b.client->Barrier()
                                       : b.client->WaitApplied());
  *seconds = Seconds(t0, Clock::now());
  return ps::Status::OK();
}

int RunResident(Bench& b, size_t n) {
  std::vector<uint64_t> keys(n);
  std::vector<float> grads(n * b.dim), out(n * b.dim);
  Draw(&b.rng, keys, grads);
  double insert = 0;
  if (ps::Status s = TimedPush(b, keys, grads, &insert); !s.ok()) {
    return Fail("insert", s);
  }
  PrintResult("insert", RateOf(b, n, insert));
  // One SGD step from a zero row: -lr * g (rounded once whichever way the
  // kernel computes it). A HASHED table's colliding keys share a row, so
  // they miss.
  if (ps::Status s = b.client->Pull(b.table, keys, out); !s.ok()) {
    return Fail("pull", s);
  }
  size_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    bool hit = true;
    for (size_t d = 0; d < b.dim; ++d) {
      const float want = -(b.learning_rate * grads[i * b.dim + d]);
      hit &= std::fabs(out[i * b.dim + d] - want) <=
             1e-6f * std::fabs(want) + 1e-30f;
    }
    hits += hit;
  }
  std::printf("RESULT mode=verify hit_fraction=%.6f\n",
              static_cast<double>(hits) / static_cast<double>(n));
  std::vector<double> pulls, pushes;
  for (uint32_t it = 0; it < FLAGS_iterations; ++it) {
    ps::Status s = Sync(b);
    if (!s.ok()) return Fail("barrier", s);
    auto t0 = Clock::now();
    s = b.client->Pull(b.table, keys, out);
    if (!s.ok()) return Fail("pull", s);
    s = Sync(b);
    if (!s.ok()) return Fail("barrier", s);
    pulls.push_back(Seconds(t0, Clock::now()));
  }
  for (uint32_t it = 0; it < FLAGS_iterations; ++it) {
    Draw(&b.rng, {}, grads);
    double seconds = 0;
    if (ps::Status s = TimedPush(b, keys, grads, &seconds); !s.ok()) {
      return Fail("push", s);
    }
    pushes.push_back(seconds);
  }
  PrintResult("pull_resident", RateOf(b, n, Median(pulls)));
  PrintResult("push_resident", RateOf(b, n, Median(pushes)));
  return 0;
}

// --fill: every id (1..ids) pushed once, n keys a push.
int FillKeySpace(Bench& b, uint64_t ids, size_t n) {
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  const auto t0 = Clock::now();
  for (uint64_t first = 1; first <= ids; first += n) {
    const uint64_t last = std::min<uint64_t>(ids, first + n - 1);
    keys.clear();
    for (uint64_t r = first; r <= last; ++r) {
      keys.push_back(ps::bench::ZipfKeys::KeyOf(r));
    }
    grads.resize(keys.size() * b.dim);
    Draw(&b.rng, {}, grads);
    if (ps::Status s = b.client->Push(b.table, keys, grads); !s.ok()) {
      return Fail("fill push", s);
    }
  }
  if (ps::Status s = b.client->WaitApplied(); !s.ok()) return Fail("fill", s);
  const double seconds = Seconds(t0, Clock::now());
  std::printf("fill: %" PRIu64 " keys in %.1f s\n", ids, seconds);
  std::printf("RESULT mode=fill seconds=%.2f mkeys_per_s=%.3f\n", seconds,
              static_cast<double>(ids) / seconds / 1e6);
  return 0;
}

int RunTrain(Bench& b, KeyLaw key_law) {
  const size_t n = size_t{FLAGS_batch_examples} * FLAGS_example_keys;
  std::vector<uint64_t> keys(n);
  std::vector<float> grads(n * b.dim), out(n * b.dim);
  std::vector<double> push_s, pull_s;
  std::optional<ps::bench::ZipfKeys> skewed;
  std::optional<ps::bench::CriteoKeys> criteo;
  uint64_t ids = 0;
  if (FLAGS_key_space > 0 && key_law == KeyLaw::kCriteo) {
    criteo.emplace(FLAGS_key_space);
    ids = criteo->ids();
    std::printf(
        "keys: ps_datagen --vocab=criteo fields at --vocab_scale=%g, "
        "%" PRIu64 " ids\n",
        criteo->vocab_scale(), ids);
  } else if (FLAGS_key_space > 0) {
    skewed.emplace(FLAGS_key_space, FLAGS_zipf);
    ids = FLAGS_key_space;
  }
  if (FLAGS_fill && ids > 0) {
    if (int rc = FillKeySpace(b, ids, n); rc != 0) return rc;
  }
  Clock::time_point timed_since{};
  for (uint32_t it = 0; it < FLAGS_warmup_batches + FLAGS_batches; ++it) {
    if (it == FLAGS_warmup_batches) timed_since = Clock::now();
    if (FLAGS_train_seconds > 0 && it > FLAGS_warmup_batches &&
        Seconds(timed_since, Clock::now()) >= FLAGS_train_seconds) {
      break;
    }
    Draw(&b.rng, ids > 0 ? std::span<uint64_t>() : keys, grads);
    if (skewed) {
      for (auto& k : keys) k = skewed->Key(b.rng);
    } else if (criteo) {
      for (size_t e = 0; e < n; e += ps::bench::CriteoKeys::kFields) {
        const std::span<uint64_t> example(keys.data() + e,
                                          ps::bench::CriteoKeys::kFields);
        criteo->Example(b.rng, example);
        for (auto& k : example) k = ps::bench::ZipfKeys::KeyOf(k);
      }
    }
    auto t0 = Clock::now();
    ps::Status s = b.client->Pull(b.table, keys, out);
    if (!s.ok()) return Fail("pull", s);
    auto t1 = Clock::now();
    s = b.client->Push(b.table, keys, grads);
    if (s.ok()) s = b.client->WaitApplied();
    if (!s.ok()) return Fail("push", s);
    auto t2 = Clock::now();
    Observe(b.pull_seconds, Seconds(t0, t1));
    Observe(b.push_seconds, Seconds(t1, t2));
    if (it < FLAGS_warmup_batches) continue;
    pull_s.push_back(Seconds(t0, t1));
    push_s.push_back(Seconds(t1, t2));
  }
  double pushing = 0, pulling = 0;
  for (double t : push_s) pushing += t;
  for (double t : pull_s) pulling += t;
  const double per_s = push_s.size() / pushing;
  const double steps_per_s = push_s.size() / (pushing + pulling);
  std::printf(
      "train: %zu steps of %zu keys: %.0f pushes/s; push p50 %.3f ms, p99 "
      "%.3f ms; pull p50 %.3f ms, p99 %.3f ms\n",
      push_s.size(), n, per_s, Quantile(push_s, 0.5) * 1e3,
      Quantile(push_s, 0.99) * 1e3, Quantile(pull_s, 0.5) * 1e3,
      Quantile(pull_s, 0.99) * 1e3);
  std::printf(
      "RESULT mode=train steps=%zu pushes_per_s=%.1f steps_per_s=%.2f "
      "push_p50_ms=%.4f push_p99_ms=%.4f pull_p50_ms=%.4f pull_p99_ms=%.4f\n",
      push_s.size(), per_s, steps_per_s, Quantile(push_s, 0.5) * 1e3,
      Quantile(push_s, 0.99) * 1e3, Quantile(pull_s, 0.5) * 1e3,
      Quantile(pull_s, 0.99) * 1e3);
  return 0;
}

// Prints the peak RSS of this worker and of the servers (the largest), and
// what the servers read from disk (all of them).
int ReportPeakRss(const std::vector<pid_t>& servers) {
  auto self = ps::bench::PeakRssKib(0);
  if (!self.ok()) return Fail("peak RSS", self.status());
  uint64_t server_kib = 0, server_read = 0;
  for (pid_t pid : servers) {
    auto kib = ps::bench::PeakRssKib(pid);
    if (!kib.ok()) return Fail("peak RSS of a server", kib.status());
    auto read = ps::bench::StorageReadBytes(pid);
    if (!read.ok()) return Fail("disk reads of a server", read.status());
    std::printf("server pid %d: peak RSS %.1f MiB, read %.1f MiB from disk\n",
                static_cast<int>(pid), *kib / 1024.0, *read / 1048576.0);
    server_kib = std::max(server_kib, *kib);
    server_read += *read;
  }
  std::printf("RESULT mode=rss worker_peak_mib=%.1f", *self / 1024.0);
  if (!servers.empty()) {
    std::printf(" server_peak_mib=%.1f server_read_mib=%.1f",
                server_kib / 1024.0, server_read / 1048576.0);
  }
  std::printf("\n");
  return 0;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string a; std::getline(ss, a, ',');) {
    if (!a.empty()) parts.push_back(a);
  }
  return parts;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("push/pull throughput against ps_server processes");
  if (ps::Status s = ps::cli::ParseFlags(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", s.message().c_str());
    return 2;
  }
  ps::worker::PsClient::Options o;
  o.worker_id = FLAGS_worker_id;
  o.num_workers = FLAGS_num_workers;
  o.servers = SplitCommas(FLAGS_servers);
  auto transport = ps::xfer::TransportChoiceFromName(FLAGS_transport);
  if (!transport.ok()) {
    std::fprintf(stderr, "ps_bench: --transport %s\n",
                 transport.status().message().c_str());
    return 2;
  }
  o.xfer.transport = *transport;
  if (auto env = ps::xfer::ApplyEnvironment(std::move(o.xfer), environ);
      env.ok()) {
    o.xfer = std::move(*env);
  } else {
    std::fprintf(stderr, "ps_bench: %s\n", env.status().ToString().c_str());
    return 2;
  }
  Mode mode = Mode::kBoth;
  if (!ParseMode(FLAGS_mode, &mode)) {
    std::fprintf(
        stderr,
        "ps_bench: --mode must be push, pull, both, resident or train\n");
    return 2;
  }
  KeyLaw key_law = KeyLaw::kZipf;
  if (!ParseKeyLaw(FLAGS_key_law, &key_law)) {
    std::fprintf(stderr,
                 "ps_bench: --key_law must be zipf or criteo, not '%s'\n",
                 FLAGS_key_law.c_str());
    return 2;
  }
  if (key_law == KeyLaw::kCriteo &&
      FLAGS_example_keys != ps::bench::CriteoKeys::kFields) {
    std::fprintf(stderr,
                 "ps_bench: --key_law=criteo draws one key per field of the "
                 "39: --example_keys must be 39, not %u\n",
                 FLAGS_example_keys);
    return 2;
  }
  if (!(FLAGS_zipf >= 0 && FLAGS_zipf <= 10)) {
    std::fprintf(stderr, "ps_bench: --zipf must be in [0, 10]\n");
    return 2;
  }
  if (FLAGS_iterations == 0 || FLAGS_keys == 0 || FLAGS_batches == 0 ||
      FLAGS_batch_examples == 0 || FLAGS_example_keys == 0) {
    std::fprintf(stderr,
                 "ps_bench: --iterations, --keys, --batches, "
                 "--batch_examples and --example_keys must be >= 1\n");
    return 2;
  }
  // Read before connecting, so that a wrong file is a usage error up front.
  std::vector<pid_t> server_pids;
  for (const std::string& path : SplitCommas(FLAGS_server_pid_files)) {
    auto pid = ps::bench::ReadPidFile(path);
    if (!pid.ok()) {
      Fail("--server_pid_files", pid.status());
      return 2;
    }
    server_pids.push_back(*pid);
  }
  if (FLAGS_metrics_port >= 0) {
    if (ps::Status h = ps::metrics::CheckHost(FLAGS_metrics_host); !h.ok()) {
      Fail("--metrics_host", h);
      return 2;
    }
  }
  // With metrics, the client counts as ps_worker's does (credit waits,
  // quantization error, reconnects).
  std::unique_ptr<ps::worker::ClientCounters> counters;
  if (FLAGS_metrics_port >= 0) {
    counters = std::make_unique<ps::worker::ClientCounters>(
        static_cast<uint32_t>(o.servers.size()));
    o.counters = counters.get();
  }
  auto client_or = ps::worker::PsClient::Connect(o);
  if (!client_or.ok()) return Fail("connect", client_or.status());
  auto client = std::move(client_or).value();

  const ps::proto::TableSpec* spec = nullptr;
  if (FLAGS_table.empty()) {
    for (uint32_t id = 0; id < 1024 && spec == nullptr; ++id) {
      spec = client->table(id);
    }
  } else {
    char* end = nullptr;
    unsigned long id = std::strtoul(FLAGS_table.c_str(), &end, 10);
    spec = (*end == '\0') ? client->table(static_cast<uint32_t>(id))
                          : client->table(FLAGS_table);
  }
  if (spec == nullptr) {
    std::fprintf(stderr, "ps_bench: no table '%s' on the servers\n",
                 FLAGS_table.c_str());
    return 2;
  }
  if (spec->dim() != FLAGS_dim) {
    std::fprintf(stderr, "ps_bench: table %s has dim %u, --dim says %u\n",
                 spec->name().c_str(), spec->dim(), FLAGS_dim);
    return 2;
  }
  Bench b;
  b.client = client.get();
  b.table = spec->id();
  b.dim = spec->dim();
  b.learning_rate = spec->optimizer().learning_rate();
  b.num_workers = FLAGS_num_workers;
  ps::metrics::Registry registry;
  std::unique_ptr<ps::metrics::Exporter> exporter;
  if (FLAGS_metrics_port >= 0) {
    const ps::metrics::Labels l = {
        {"worker", "worker-" + std::to_string(FLAGS_worker_id)},
        {"table", spec->name()}};
    const auto bounds = ps::metrics::ExponentialBounds(1e-5, 2, 22);
    ps::metrics::AddProcessCollector(&registry);
    auto push = registry.AddHistogram("ps_worker_push_seconds",
                                      "Latency of one push call.", bounds, l);
    auto pull = registry.AddHistogram("ps_worker_pull_seconds",
                                      "Latency of one pull call.", bounds, l);
    if (!push.ok()) return Fail("metrics", push.status());
    if (!pull.ok()) return Fail("metrics", pull.status());
    b.push_seconds = *push;
    b.pull_seconds = *pull;
    auto e = ps::metrics::Exporter::Start(&registry, FLAGS_metrics_host,
                                          FLAGS_metrics_port);
    if (!e.ok()) return Fail("--metrics_port", e.status());
    exporter = std::move(*e);
    std::printf("metrics: %s\n", exporter->url().c_str());
  }
  // Each worker its own keys (mt19937_64 streams of different seeds).
  b.rng.seed(FLAGS_seed * 1000003 + FLAGS_worker_id);

  std::printf(
      "ps_bench: worker %u of %u, table %s (dim %zu, capacity %llu), %zu "
      "server(s), transport %s\n",
      FLAGS_worker_id, FLAGS_num_workers, spec->name().c_str(), b.dim,
      static_cast<unsigned long long>(spec->capacity()), o.servers.size(),
      FLAGS_transport.c_str());
  int rc = 0;
  if (mode == Mode::kTrain) rc = RunTrain(b, key_law);
  if (rc == 0 && (mode == Mode::kPush || mode == Mode::kBoth)) {
    rc = RunPush(b, FLAGS_keys);
  }
  if (rc == 0 && (mode == Mode::kPull || mode == Mode::kBoth)) {
    rc = RunPull(b, FLAGS_keys);
  }
  if (rc == 0 && mode == Mode::kResident) rc = RunResident(b, FLAGS_keys);
  if (rc == 0) rc = ReportPeakRss(server_pids);
  return rc;
}
