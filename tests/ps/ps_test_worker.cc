// ps_test_worker: a small stand-in worker for scripts/start_cluster.sh until
// the real trainer (ps_worker) exists. It connects to the servers with
// PsClient and runs steps of synthetic work: pull a random batch of keys,
// push a random gradient for them, Clock(). It prints one progress line per
// --report_every steps and a summary at the end; SIGTERM or SIGINT end the
// run after the current step (exit code 0).
//
// For tests that compare whole runs (tests/multihost): --integer_gradients
// pushes whole numbers, so on an SGD table every row is an exact fp32 sum
// whatever order the pushes are applied in; --rows_out writes, once every
// worker is done, every row of the key space and each server's counters,
// so two runs of the same job can be compared bit for bit.
#include <gflags/gflags.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/ps_client.h"
#include "core/transport_name.h"

DEFINE_uint32(worker_id, 0, "This worker's id, in [0, --num_workers).");
DEFINE_uint32(num_workers, 1, "Number of workers in the cluster.");
DEFINE_string(servers, "",
              "Comma-separated control addresses (host:port) of the servers, "
              "in shard order (required).");
DEFINE_string(table, "",
              "Name of the table to train (default: the first table the "
              "servers serve).");
DEFINE_string(exact_table, "",
              "Also pull and push each step's keys and gradients in this "
              "EXACT table (of the same dim), and write its rows with "
              "--rows_out.");
DEFINE_uint64(steps, 100, "Steps to run; 0 runs until SIGTERM/SIGINT.");
DEFINE_uint32(batch_keys, 1000, "Keys pulled and pushed per step.");
DEFINE_uint64(key_space, 1000000,
              "Keys are drawn uniformly from [0, key_space) (hashed and exact "
              "tables; dense tables push and pull the whole table).");
DEFINE_double(gradient_scale, 0.01,
              "Gradients are uniform in [-scale, scale].");
DEFINE_bool(integer_gradients, false,
            "Gradients are whole numbers in [-scale, scale] (with SGD the "
            "rows then do not depend on the order the pushes apply in).");
DEFINE_string(rows_out, "",
              "If set, at the end wait for every worker (a Barrier: all "
              "pushes applied), pull every key of [0, key_space) (dense: the "
              "whole table) and write each server's counters and every row "
              "(the float bits in hex) to this file.");
DEFINE_uint32(step_sleep_ms, 0, "Pause after each step (a slower worker).");
DEFINE_uint32(report_every, 10, "Print progress every this many steps.");
DEFINE_string(transport, "auto", "xfer transport: auto, shm or tcp.");
DEFINE_int32(timeout_ms, 30000,
             "A server silent for this long counts as lost.");
DEFINE_string(cluster_secret_file, "",
              "The cluster's shared secret (as ps_server's); empty: "
              "$PS_CLUSTER_SECRET_FILE, else $PS_CLUSTER_SECRET, else none.");

namespace {

volatile std::sig_atomic_t g_stop = 0;  // set by SIGTERM / SIGINT only
void OnStopSignal(int) { g_stop = 1; }

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Fail(const std::string& what, const ps::Status& s) {
  std::fprintf(stderr, "ps_test_worker %u: %s: %s\n", FLAGS_worker_id,
               what.c_str(), s.ToString().c_str());
  return 1;
}

// One line per server ("shard S: packets_applied A rows_applied R
// packets_rejected J"), then "row K B0 B1 ..." per row, each value's bits in
// hex: equal files mean bit-identical rows.
// Every row of `table` (or every key of --key_space), pulled, as hex bits
// of its floats: "<prefix> <row> bits...".
ps::Status PrintRows(ps::worker::PsClient& client,
                     const ps::proto::TableSpec& table, const char* prefix,
                     std::FILE* f) {
  const uint32_t dim = table.dim();
  const bool dense = table.kind() == ps::proto::DENSE;
  const uint64_t rows = dense ? table.capacity() : FLAGS_key_space;
  std::vector<uint64_t> keys(dense ? 0 : rows);
  for (uint64_t k = 0; k < keys.size(); ++k) keys[k] = k;
  std::vector<float> values(rows * dim);
  PS_RETURN_IF_ERROR(dense ? client.PullDense(table.id(), values)
                           : client.Pull(table.id(), keys, values));
  for (uint64_t r = 0; r < rows; ++r) {
    std::fprintf(f, "%s %llu", prefix, static_cast<unsigned long long>(r));
    for (uint32_t j = 0; j < dim; ++j) {
      uint32_t bits;
      std::memcpy(&bits, &values[r * dim + j], sizeof(bits));
      std::fprintf(f, " %08x", bits);
    }
    std::fputc('\n', f);
  }
  return ps::Status::OK();
}

ps::Status WriteRows(ps::worker::PsClient& client,
                     const ps::proto::TableSpec& table,
                     const ps::proto::TableSpec* exact, size_t num_servers,
                     const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return ps::IOError("cannot write " + path + ": " + std::strerror(errno));
  }
  for (uint32_t shard = 0; shard < num_servers; ++shard) {
    auto stats = client.Stats(shard);
    if (!stats.ok()) {
      std::fclose(f);
      return stats.status();
    }
    std::fprintf(f,
                 "shard %u: packets_applied %llu rows_applied %llu "
                 "packets_rejected %llu\n",
                 shard,
                 static_cast<unsigned long long>(stats->packets_applied()),
                 static_cast<unsigned long long>(stats->rows_applied()),
                 static_cast<unsigned long long>(stats->packets_rejected()));
  }
  ps::Status s = PrintRows(client, table, "row", f);
  if (s.ok() && exact != nullptr) s = PrintRows(client, *exact, "exact", f);
  if (std::fclose(f) != 0 && s.ok()) {
    return ps::IOError("cannot write " + path);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "a synthetic worker for the parameter server (pull, push, clock)\n"
      "usage: ps_test_worker --servers=HOST:PORT,... --worker_id=W "
      "--num_workers=N [--steps=S ...]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) {
    std::fprintf(stderr, "ps_test_worker: unexpected argument '%s'\n", argv[1]);
    return 2;
  }
  ps::worker::PsClient::Options options;
  options.worker_id = FLAGS_worker_id;
  options.num_workers = FLAGS_num_workers;
  options.servers = SplitCommas(FLAGS_servers);
  options.xfer.peer_timeout_ms = FLAGS_timeout_ms;
  // No thread runs yet (this writes to the environment).
  auto secret = ps::xfer::ClusterSecret::ResolveForProgram(
      FLAGS_cluster_secret_file, environ);
  if (!secret.ok()) {
    std::fprintf(stderr, "ps_test_worker: %s\n",
                 secret.status().ToString().c_str());
    return 2;
  }
  options.xfer.secret = std::move(*secret);
  auto transport = ps::xfer::TransportChoiceFromName(FLAGS_transport);
  if (!transport.ok()) {
    std::fprintf(stderr, "ps_test_worker: --transport %s\n",
                 transport.status().message().c_str());
    return 2;
  }
  options.xfer.transport = *transport;
  if (options.servers.empty() || FLAGS_worker_id >= FLAGS_num_workers ||
      FLAGS_batch_keys == 0 || FLAGS_key_space == 0) {
    std::fprintf(stderr,
                 "ps_test_worker: need --servers, --worker_id < "
                 "--num_workers, --batch_keys > 0 and --key_space > 0\n");
    return 2;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  auto client_or = ps::worker::PsClient::Connect(options);
  if (!client_or.ok()) return Fail("connect", client_or.status());
  auto& client = *client_or;
  const ps::proto::TableSpec* table = nullptr;
  if (FLAGS_table.empty()) {
    for (uint32_t id = 0; id < 1024 && table == nullptr; ++id)
      table = client->table(id);
  } else {
    table = client->table(FLAGS_table);
  }
  if (table == nullptr) {
    std::fprintf(stderr, "ps_test_worker: no table '%s' on the servers\n",
                 FLAGS_table.c_str());
    return 2;
  }
  const ps::proto::TableSpec* exact = nullptr;
  if (!FLAGS_exact_table.empty()) {
    exact = client->table(FLAGS_exact_table);
    if (exact == nullptr || exact->kind() != ps::proto::EXACT ||
        exact->dim() != table->dim()) {
      std::fprintf(stderr,
                   "ps_test_worker: --exact_table '%s' is not an EXACT table "
                   "of dim %u on the servers\n",
                   FLAGS_exact_table.c_str(), table->dim());
      return 2;
    }
  }
  const uint32_t dim = table->dim();
  const bool dense = table->kind() == ps::proto::DENSE;
  const size_t rows = dense ? table->capacity() : FLAGS_batch_keys;
  std::printf(
      "ps_test_worker %u/%u: table '%s' (id %u, dim %u%s), %s steps\n",
      FLAGS_worker_id, FLAGS_num_workers, table->name().c_str(), table->id(),
      dim, dense ? ", dense" : "",
      FLAGS_steps == 0 ? "unbounded" : std::to_string(FLAGS_steps).c_str());
  std::fflush(stdout);

  std::mt19937_64 rng(0x5eed + FLAGS_worker_id);
  std::uniform_real_distribution<float> grad(-FLAGS_gradient_scale,
                                             FLAGS_gradient_scale);
  const int64_t int_scale = std::llround(FLAGS_gradient_scale);
  std::uniform_int_distribution<int64_t> int_grad(-int_scale, int_scale);
  std::vector<uint64_t> keys(dense ? 0 : rows);
  std::vector<float> weights(rows * dim), grads(rows * dim);
  const auto start = std::chrono::steady_clock::now();
  uint64_t step = 0;
  while (!g_stop && (FLAGS_steps == 0 || step < FLAGS_steps)) {
    for (auto& k : keys) k = rng() % FLAGS_key_space;
    for (auto& g : grads) {
      g = FLAGS_integer_gradients ? static_cast<float>(int_grad(rng))
                                  : grad(rng);
    }
    ps::Status s = dense ? client->PullDense(table->id(), weights)
                         : client->Pull(table->id(), keys, weights);
    if (!s.ok()) return Fail("pull", s);
    s = dense ? client->PushDense(table->id(), grads)
              : client->Push(table->id(), keys, grads);
    if (!s.ok()) return Fail("push", s);
    if (exact != nullptr && !dense) {
      s = client->Pull(exact->id(), keys, weights);
      if (!s.ok()) return Fail("exact pull", s);
      s = client->Push(exact->id(), keys, grads);
      if (!s.ok()) return Fail("exact push", s);
    }
    auto clock = client->Clock();
    if (!clock.ok()) return Fail("clock", clock.status());
    ++step;
    if (FLAGS_report_every != 0 && step % FLAGS_report_every == 0) {
      auto min_clock = client->MinClock();
      std::printf(
          "worker %u: step %lu, clock %lu, min clock %lu\n", FLAGS_worker_id,
          static_cast<unsigned long>(step), static_cast<unsigned long>(*clock),
          min_clock.ok() ? static_cast<unsigned long>(*min_clock) : 0ul);
      std::fflush(stdout);
    }
    if (FLAGS_step_sleep_ms != 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(FLAGS_step_sleep_ms));
    }
  }
  ps::Status s = client->WaitApplied();
  if (!s.ok()) return Fail("wait applied", s);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("worker %u: done, %lu steps in %.2f s (%.0f keys/s pushed)%s\n",
              FLAGS_worker_id, static_cast<unsigned long>(step), secs,
              secs > 0 ? static_cast<double>(step * rows) / secs : 0.0,
              g_stop ? ", stopped by signal" : "");
  std::fflush(stdout);
  if (!FLAGS_rows_out.empty()) {
    s = client->Barrier();
    if (!s.ok()) return Fail("barrier", s);
    s = WriteRows(*client, *table, exact, options.servers.size(),
                  FLAGS_rows_out);
    if (!s.ok()) return Fail("rows", s);
  }
  return 0;
}
