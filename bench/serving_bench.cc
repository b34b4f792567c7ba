// serving_bench: lookups on a ps_serve replica while it follows a new
// incremental checkpoint every second, and how fresh it stays.
//
//   serving_bench --dir=/tmp/sb --serve_bin=build/serving/ps_serve
//
// Writes a full checkpoint of one EXACT table (--rows keys of dim --dim,
// SGD), starts ps_serve on it, and for each transport (--transports) looks
// up --lookup_keys keys (all with a row) from one client for --seconds,
// one lookup after the other, while a thread commits an incremental
// checkpoint of --changed_rows rows every second. Prints samples for
// bench/report (scripts/bench_serving.sh):
//   lookup_ms_<t>          each lookup's milliseconds (the report takes
//                          medians: give p50 and p99 as their own samples)
//   p50_ms_<t> p99_ms_<t>  percentiles of this run's lookups
//   lookups_per_s_<t>      lookups answered per second
//   fresh_ms               per increment: from its commit to the first
//                          lookup that names it (or a later one)
//   verify_ms              per increment: reading its rows as ps_ckpt
//                          verify reads them (checkpoint::VerifyCheckpoint)
//   fresh_full_ms, verify_full_ms   the same for one full checkpoint after
//                          the lookups (the replica compares it whole)
//   loaded_rss_mib         ps_serve's RSS once it served the first one
//   peak_rss_increments_mib  its peak RSS (VmHWM) over the increments' switches
//   peak_rss_mib           its peak RSS over the switches after the first
//                          load, the full checkpoint's included
// With --tier_fraction=F (0 < F < 1) the table is tiered (when_full:
// WHEN_FULL_MOVE_TO_DISK, capacity F of its rows): the replica keeps that
// many rows in memory and the others in its disk tier (--disk_tier_dir in
// --dir). With --zipf=S (> 0) each lookup draws its keys from a Zipf law
// of exponent S over every key (a pool of 8,192 lookups, cycled: more keys than
// a tiered table holds in memory) instead of the same spread-out keys each
// time. --label names the samples (lookups_per_s_<t>_<label>, fresh_ms_<label>,
// ...). It also writes --redis_load (RESP SET commands: the lookup keys' rows
// as 64-byte binary values, for redis-cli --pipe) and --redis_keys (the keys'
// names, one per line), so that the script's Redis peer serves the same
// rows.
#include <gflags/gflags.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <span>
#include <sstream>
#include <thread>
#include <vector>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_writer.h"
#include "cli/flags.h"
#include "core/transport_name.h"
#include "launch/process.h"
#include "launch/server_ready.h"
#include "protocol/shard_map.h"
#include "serving/serving_client.h"

DEFINE_string(dir, "/tmp/serving_bench", "Scratch folder (emptied first).");
DEFINE_string(serve_bin, "", "The ps_serve program. Required.");
DEFINE_uint64(rows, 1000000, "Keys (rows) of the table.");
DEFINE_uint32(dim, 16, "Floats per row.");
DEFINE_uint32(lookup_keys, 1000, "Keys each lookup holds.");
DEFINE_uint64(changed_rows, 100000,
              "Rows each incremental checkpoint changes.");
DEFINE_double(seconds, 10, "Seconds of lookups per transport.");
DEFINE_string(transports, "shm,tcp", "Transports to time, comma-separated.");
DEFINE_int32(poll_ms, 20, "ps_serve --poll_ms.");
DEFINE_int32(lookup_threads, 1, "ps_serve --lookup_threads.");
DEFINE_string(redis_load, "", "Where to write the Redis load (RESP).");
DEFINE_string(redis_keys, "", "Where to write the lookup keys' names.");
DEFINE_double(tier_fraction, 0,
              "Rows kept in memory, as a fraction of the table, by a tiered "
              "table (0: not tiered).");
DEFINE_double(zipf, 0,
              "Exponent of the Zipf law lookups draw keys from (0: the same "
              "keys every lookup).");
DEFINE_string(label, "", "Appended to the sample names.");
DEFINE_string(serve_flags, "",
              "More ps_serve flags, space-separated (e.g. "
              "--promote_per_poll=0).");

namespace {

namespace ck = ps::checkpoint;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kTable = 1;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t KeyOf(uint64_t i) { return ps::protocol::Mix64(i + 1); }

float ValueOf(uint64_t key, uint32_t col, uint64_t version) {
  return static_cast<float>((key >> 40) % 1000) + col * 0.25f +
         static_cast<float>(version);
}

ps::proto::TableSpec Spec() {
  ps::proto::TableSpec s;
  s.set_id(kTable);
  s.set_name("ids");
  s.set_kind(ps::proto::EXACT);
  s.set_dim(FLAGS_dim);
  s.set_capacity(FLAGS_rows);
  if (FLAGS_tier_fraction > 0) {
    s.set_when_full(ps::proto::WHEN_FULL_MOVE_TO_DISK);
    s.set_capacity(std::max<uint64_t>(
        1, static_cast<uint64_t>(FLAGS_rows * FLAGS_tier_fraction)));
  }
  s.mutable_optimizer()->set_name("sgd");
  return s;
}

// `lookups` x `keys` keys of `all` drawn from a Zipf law of exponent `s`
// (rank r has weight 1/(r+1)^s; ranks scattered over the keys).
std::vector<uint64_t> ZipfPool(const std::vector<uint64_t>& all, double s,
                               size_t lookups, size_t keys) {
  std::vector<double> cdf(all.size());
  double sum = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    sum += 1.0 / std::pow(static_cast<double>(r + 1), s);
    cdf[r] = sum;
  }
  std::vector<uint64_t> pool(lookups * keys);
  uint64_t seed = 42;
  for (auto& key : pool) {
    seed = ps::protocol::Mix64(seed);
    const double u = static_cast<double>(seed >> 11) * 0x1.0p-53 * sum;
    const size_t r = static_cast<size_t>(
        std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    // An odd multiplier prime to 5: a bijection of the ranks onto 10^k keys.
    key = all[(std::min(r, all.size() - 1) * 2654435761ull) % all.size()];
  }
  return pool;
}

// Checkpoint `step` of `keys` (sorted; every key when full), key i at
// version versions[i].
ps::Status WriteCheckpoint(const std::string& root, uint64_t step,
                           const std::vector<uint64_t>& keys,
                           const std::vector<uint64_t>& versions, bool full) {
  const std::string dir = ck::JoinPath(root, ck::CheckpointDirName(step));
  ck::ShardSnapshot snap;
  snap.step = step;
  ck::TableSnapshot t;
  t.spec = Spec();
  t.full = full;
  t.state_arrays = 0;
  t.ids = keys;
  t.values.reserve(t.ids.size() * FLAGS_dim);
  for (size_t i = 0; i < keys.size(); ++i) {
    for (uint32_t c = 0; c < FLAGS_dim; ++c) {
      t.values.push_back(ValueOf(keys[i], c, versions[i]));
    }
  }
  t.last_update.assign(t.ids.size(), step);
  snap.tables.push_back(std::move(t));
  ck::ShardWriteOptions o;
  o.kind = full ? ck::proto::FULL : ck::proto::INCREMENTAL;
  o.parent = full ? "" : ck::CheckpointDirName(step - 1);
  auto e = ck::WriteShard(dir, snap, o);
  if (!e.ok()) return e.status();
  ck::CommitRequest c;
  c.checkpoint_dir = dir;
  c.step = step;
  c.tables = {Spec()};
  return ck::CommitCheckpoint(c).status();
}

// A field of /proc/PID/status in MiB ("VmRSS", "VmHWM"); 0 if unreadable.
double StatusMib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtod(line.c_str() + field.size() + 1, nullptr) / 1024;
    }
  }
  return 0;
}

// A sample's name, with --label after it.
std::string Named(const std::string& name) {
  return FLAGS_label.empty() ? name : name + "_" + FLAGS_label;
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

int Run() {
  if (FLAGS_serve_bin.empty()) {
    std::fprintf(stderr, "serving_bench: --serve_bin is required\n");
    return 2;
  }
  std::filesystem::remove_all(FLAGS_dir);
  std::filesystem::create_directories(FLAGS_dir);
  const std::string root = ck::JoinPath(FLAGS_dir, "ckpt");
  std::vector<uint64_t> all(FLAGS_rows);
  for (uint64_t i = 0; i < FLAGS_rows; ++i) all[i] = KeyOf(i);
  std::sort(all.begin(), all.end());
  std::vector<uint64_t> version(FLAGS_rows, 0);  // of all[i]
  uint64_t step = 1;
  if (ps::Status s = WriteCheckpoint(root, step, all, version, true); !s.ok()) {
    std::fprintf(stderr, "serving_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  // The lookup keys: every 997th key, so they spread over the table; or
  // lookups drawn from a Zipf law.
  std::vector<uint64_t> lookup;
  for (uint64_t i = 0; lookup.size() < FLAGS_lookup_keys; i += 997) {
    lookup.push_back(all[i % FLAGS_rows]);
  }
  constexpr size_t kPoolLookups = 8192;
  const std::vector<uint64_t> pool =
      FLAGS_zipf > 0
          ? ZipfPool(all, FLAGS_zipf, kPoolLookups, FLAGS_lookup_keys)
          : std::vector<uint64_t>();
  size_t lookups_made = 0;
  // The keys of the next lookup.
  auto next_keys = [&]() -> std::span<const uint64_t> {
    if (pool.empty()) return lookup;
    const size_t at = (lookups_made++ % kPoolLookups) * FLAGS_lookup_keys;
    return std::span<const uint64_t>(pool.data() + at, FLAGS_lookup_keys);
  };

  if (!FLAGS_redis_load.empty()) {
    std::ofstream load(FLAGS_redis_load, std::ios::binary);
    std::ofstream names(FLAGS_redis_keys);
    for (uint64_t key : lookup) {
      const std::string name = "k" + std::to_string(key);
      std::string value(FLAGS_dim * sizeof(float), '\0');
      for (uint32_t c = 0; c < FLAGS_dim; ++c) {
        const float v = ValueOf(key, c, 0);
        std::memcpy(value.data() + c * sizeof(float), &v, sizeof v);
      }
      load << "*3\r\n$3\r\nSET\r\n$" << name.size() << "\r\n"
           << name << "\r\n$" << value.size() << "\r\n"
           << value << "\r\n";
      names << name << "\n";
    }
  }

  ps::launch::ProcessSpec spec;
  const std::string port_file = ck::JoinPath(FLAGS_dir, "serve.port");
  spec.argv = {FLAGS_serve_bin,
               "--checkpoint_dir=" + root,
               "--port_file=" + port_file,
               "--poll_ms=" + std::to_string(FLAGS_poll_ms),
               "--max_keys=" + std::to_string(FLAGS_lookup_keys),
               "--lookup_threads=" + std::to_string(FLAGS_lookup_threads)};
  if (FLAGS_tier_fraction > 0) {
    spec.argv.push_back("--disk_tier_dir=" + ck::JoinPath(FLAGS_dir, "tier"));
  }
  {
    std::stringstream in(FLAGS_serve_flags);
    for (std::string flag; in >> flag;) spec.argv.push_back(flag);
  }
  spec.log_path = ck::JoinPath(FLAGS_dir, "serve.log");
  spec.name = "ps_serve";
  auto replica = ps::launch::Process::Spawn(spec);
  if (!replica.ok()) {
    std::fprintf(stderr, "serving_bench: %s\n",
                 replica.status().ToString().c_str());
    return 1;
  }
  auto address = ps::launch::AwaitAddress(**replica, port_file, 120000, 5000);
  if (!address.ok()) {
    std::fprintf(stderr, "serving_bench: %s\n",
                 address.status().ToString().c_str());
    return 1;
  }

  // The replica's memory once it serves the first checkpoint (the tables
  // and the process), against its peak over switches below.
  const double loaded_rss_mib = StatusMib((*replica)->pid(), "VmRSS");
  // From here on VmHWM counts the switches, not the first load ("5" resets
  // the peak: proc(5), clear_refs).
  std::ofstream("/proc/" + std::to_string((*replica)->pid()) + "/clear_refs")
      << "5";
  std::vector<std::string> transports;
  {
    std::stringstream in(FLAGS_transports);
    for (std::string t; std::getline(in, t, ',');) transports.push_back(t);
  }
  std::vector<float> out(lookup.size() * FLAGS_dim);
  for (const std::string& name : transports) {
    ps::serving::ServingClient::Options o;
    o.replicas = {*address};
    auto transport = ps::xfer::TransportChoiceFromName(name);
    if (!transport.ok()) {
      std::fprintf(stderr, "serving_bench: %s\n",
                   transport.status().ToString().c_str());
      return 2;
    }
    o.xfer.transport = *transport;
    auto client = ps::serving::ServingClient::Connect(o);
    if (!client.ok()) {
      std::fprintf(stderr, "serving_bench: %s\n",
                   client.status().ToString().c_str());
      return 1;
    }
    for (int i = 0; i < 200; ++i) {  // warm up
      if (!(*client)->Lookup("ids", next_keys(), out).ok()) return 1;
    }
    // Increments, one a second, while the lookups run.
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::map<uint64_t, int64_t> committed;  // step -> commit ms
    std::vector<double> verify_ms;
    std::thread writer([&] {
      std::vector<uint64_t> changed, versions;
      while (!stop.load()) {
        const auto t0 = Clock::now();
        const uint64_t next = step + 1;
        std::vector<uint64_t> index;  // into `all`, ascending
        for (uint64_t i = 0; i < FLAGS_changed_rows; ++i) {
          index.push_back((next * 7919 + i * 13) % FLAGS_rows);
        }
        std::sort(index.begin(), index.end());
        index.erase(std::unique(index.begin(), index.end()), index.end());
        changed.clear();
        versions.clear();
        for (uint64_t i : index) {
          version[i] = next;
          changed.push_back(all[i]);
          versions.push_back(next);
        }
        if (!WriteCheckpoint(root, next, changed, versions, false).ok()) break;
        {
          std::lock_guard lock(mu);
          committed[next] = NowMs();
        }
        step = next;
        const auto v0 = Clock::now();
        if (ck::VerifyCheckpoint(
                ck::JoinPath(root, ck::CheckpointDirName(next)))
                .ok()) {
          verify_ms.push_back(MsSince(v0));
        }
        std::this_thread::sleep_until(t0 + std::chrono::seconds(1));
      }
    });
    std::vector<double> latency_ms;
    std::vector<std::pair<int64_t, uint64_t>> named;  // (ms, step)
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(FLAGS_seconds);
    while (Clock::now() < end) {
      const std::span<const uint64_t> keys = next_keys();
      const auto t0 = Clock::now();
      auto r = (*client)->Lookup("ids", keys, out);
      const auto t1 = Clock::now();
      if (!r.ok()) {
        std::fprintf(stderr, "serving_bench: %s\n",
                     r.status().ToString().c_str());
        stop = true;
        writer.join();
        return 1;
      }
      latency_ms.push_back(
          std::chrono::duration<double, std::milli>(t1 - t0).count());
      named.emplace_back(NowMs(), r->step);
    }
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    stop = true;
    writer.join();
    std::printf("%s %.6g ms\n", Named("p50_ms_" + name).c_str(),
                Percentile(latency_ms, 0.5));
    std::printf("%s %.6g ms\n", Named("p99_ms_" + name).c_str(),
                Percentile(latency_ms, 0.99));
    std::printf("%s %.6g /s\n", Named("lookups_per_s_" + name).c_str(),
                latency_ms.size() / elapsed);
    std::lock_guard lock(mu);
    for (const auto& [s, at] : committed) {
      for (const auto& [when, got] : named) {
        if (got >= s) {
          std::printf("%s %lld ms\n", Named("fresh_ms").c_str(),
                      static_cast<long long>(std::max<int64_t>(0, when - at)));
          break;
        }
      }
    }
    for (double v : verify_ms) {
      std::printf("%s %.6g ms\n", Named("verify_ms").c_str(), v);
    }
  }

  std::printf("%s %.6g MiB\n", Named("peak_rss_increments_mib").c_str(),
              StatusMib((*replica)->pid(), "VmHWM"));
  // A full checkpoint (the rows as they are now, every 5th one in training
  // by default): the replica compares it with what it serves. Timed from
  // its commit to the first lookup that names it; its peer reads it whole.
  {
    ps::serving::ServingClient::Options o;
    o.replicas = {*address};
    auto client = ps::serving::ServingClient::Connect(o);
    if (!client.ok()) return 1;
    const uint64_t full = step + 1;
    if (!WriteCheckpoint(root, full, all, version, true).ok()) return 1;
    const auto t0 = Clock::now();
    for (;;) {
      auto r = (*client)->Lookup("ids", lookup, out);
      if (!r.ok()) return 1;
      if (r->step >= full) break;
      if (MsSince(t0) > 60000) return 1;
    }
    std::printf("%s %.6g ms\n", Named("fresh_full_ms").c_str(), MsSince(t0));
    const auto v0 = Clock::now();
    if (!ck::VerifyCheckpoint(ck::JoinPath(root, ck::CheckpointDirName(full)))
             .ok()) {
      return 1;
    }
    std::printf("%s %.6g ms\n", Named("verify_full_ms").c_str(), MsSince(v0));
  }
  std::printf("%s %.6g MiB\n", Named("loaded_rss_mib").c_str(), loaded_rss_mib);
  std::printf("%s %.6g MiB\n", Named("peak_rss_mib").c_str(),
              StatusMib((*replica)->pid(), "VmHWM"));
  (void)(*replica)->Stop(SIGTERM, 10000);
  std::filesystem::remove_all(FLAGS_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "lookups on a ps_serve replica that follows "
      "incremental checkpoints (scripts/bench_serving.sh)");
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    std::fprintf(stderr, "serving_bench: %s\n", s.message().c_str());
    return 2;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return Run();
}
