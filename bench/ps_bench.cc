// ps_bench: push and pull throughput of one worker against running
// ps_server processes.
//
//   ps_bench --servers=127.0.0.1:7000 --table=bench1 --mode=both
//
// Keys are uniformly random uint64 feature ids (so a HASHED table sees
// duplicates only where the hash collides), values one float per dim. A
// push is timed until the servers applied it (Push + WaitApplied: the
// figure counts keys the servers took in, like an acknowledged push of
// other parameter servers); the time of the Push call alone is printed
// too. Prints the median over --iterations, after one warm-up iteration,
// in M keys/s and GB/s (GB/s counts the keys' values, keys * dim * 4
// bytes), and one "RESULT" line per mode for scripts.
#include <gflags/gflags.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/transport_name.h"
#include "worker/client/ps_client.h"

DEFINE_string(servers, "127.0.0.1:7000",
              "Comma-separated control addresses of the servers, in shard "
              "order.");
DEFINE_uint64(keys, 10000000, "Keys per push / pull.");
DEFINE_uint32(dim, 1, "Expected row dimension of --table (checked).");
DEFINE_string(table, "", "Table id or name (default: the first table).");
DEFINE_uint32(iterations, 5, "Timed iterations per mode (median reported).");
DEFINE_string(mode, "both", "push, pull or both.");
DEFINE_string(transport, "auto", "auto, shm or tcp (xfer transport).");
DEFINE_uint32(worker_id, 0, "This worker's id.");
DEFINE_uint32(num_workers, 1, "Workers the servers expect.");
DEFINE_uint64(seed, 1, "Seed of the random keys.");

namespace {

using Clock = std::chrono::steady_clock;

// CPU seconds this process used (all threads): on a shared machine the
// wall time of an iteration also counts other processes' turns.
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Fail(const std::string& what, const ps::Status& s) {
  std::fprintf(stderr, "ps_bench: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("push/pull throughput against ps_server processes");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::worker::PsClient::Options o;
  o.worker_id = FLAGS_worker_id;
  o.num_workers = FLAGS_num_workers;
  std::stringstream ss(FLAGS_servers);
  for (std::string a; std::getline(ss, a, ',');) {
    if (!a.empty()) o.servers.push_back(a);
  }
  auto transport = ps::xfer::TransportChoiceFromName(FLAGS_transport);
  if (!transport.ok()) {
    std::fprintf(stderr, "ps_bench: --transport %s\n",
                 transport.status().message().c_str());
    return 2;
  }
  o.transport = *transport;
  if (FLAGS_mode != "push" && FLAGS_mode != "pull" && FLAGS_mode != "both") {
    std::fprintf(stderr, "ps_bench: --mode must be push, pull or both\n");
    return 2;
  }
  if (FLAGS_iterations == 0 || FLAGS_keys == 0) {
    std::fprintf(stderr, "ps_bench: --iterations and --keys must be >= 1\n");
    return 2;
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
  const uint32_t table = spec->id();
  const size_t n = FLAGS_keys;
  const size_t dim = spec->dim();
  std::vector<uint64_t> keys(n);
  std::mt19937_64 rng(FLAGS_seed);
  for (auto& k : keys) k = rng();
  std::vector<float> grads(n * dim, 1.0f / 1024);
  std::vector<float> out(n * dim);
  const double value_bytes = static_cast<double>(n * dim * sizeof(float));

  std::printf(
      "ps_bench: %zu keys, table %s (dim %zu, capacity %llu), %zu "
      "server(s), transport %s\n",
      n, spec->name().c_str(), dim,
      static_cast<unsigned long long>(spec->capacity()), o.servers.size(),
      FLAGS_transport.c_str());
  if (FLAGS_mode != "pull") {
    std::vector<double> applied, call, cpu;
    for (uint32_t it = 0; it <= FLAGS_iterations; ++it) {
      const double c0 = CpuSeconds();
      auto t0 = Clock::now();
      ps::Status s = client->Push(table, keys, grads);
      if (!s.ok()) return Fail("push", s);
      auto t1 = Clock::now();
      s = client->WaitApplied();
      if (!s.ok()) return Fail("wait applied", s);
      auto t2 = Clock::now();
      if (it == 0) continue;  // warm-up: first-touch of buffers
      applied.push_back(std::chrono::duration<double>(t2 - t0).count());
      call.push_back(std::chrono::duration<double>(t1 - t0).count());
      cpu.push_back(CpuSeconds() - c0);
    }
    const double t = Median(applied);
    std::printf(
        "push: median %.4f s = %.1f M keys/s, %.2f GB/s (Push call alone: "
        "%.1f M keys/s; worker CPU %.3f s = %.1f M keys per CPU-second)\n",
        t, n / t / 1e6, value_bytes / t / 1e9, n / Median(call) / 1e6,
        Median(cpu), n / Median(cpu) / 1e6);
    std::printf("RESULT mode=push mkeys_per_s=%.2f gb_per_s=%.3f\n",
                n / t / 1e6, value_bytes / t / 1e9);
  }
  if (FLAGS_mode != "push") {
    std::vector<double> times, cpu;
    for (uint32_t it = 0; it <= FLAGS_iterations; ++it) {
      const double c0 = CpuSeconds();
      auto t0 = Clock::now();
      ps::Status s = client->Pull(table, keys, out);
      if (!s.ok()) return Fail("pull", s);
      auto t1 = Clock::now();
      if (it == 0) continue;
      times.push_back(std::chrono::duration<double>(t1 - t0).count());
      cpu.push_back(CpuSeconds() - c0);
    }
    const double t = Median(times);
    std::printf(
        "pull: median %.4f s = %.1f M keys/s, %.2f GB/s (worker CPU %.3f s "
        "over its threads)\n",
        t, n / t / 1e6, value_bytes / t / 1e9, Median(cpu));
    std::printf("RESULT mode=pull mkeys_per_s=%.2f gb_per_s=%.3f\n",
                n / t / 1e6, value_bytes / t / 1e9);
  }
  return 0;
}
