// ps_server's --metrics_port against a real process: a worker pushes into a
// 1-shard cluster, a GET of /metrics shows the rows it applied (per worker
// and per table), the rejection counters at 0, inbox and apply-thread
// metrics and the process's RSS; other paths answer 404. A bad
// --metrics_port is a clear error, of ps_server and of ps_worker alike: out
// of range exits 2, a port in use 1; so is a bad --metrics_host (exit 2).
//
// The endpoint under attack (the security review's): while 200 slowloris
// connections are held on the metrics port, scrapes answer in under 1 s
// and training goes on; 300 idle connections cost the server no more
// descriptors than the exporter's cap. And where it listens: loopback by
// default even when --listen_host is every interface, else --metrics_host.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "launch/process.h"
#include "launch/text_file.h"
#include "tests/metrics/hostile_clients.h"
#include "tests/metrics/metrics_test_util.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

constexpr char kTables[] = R"(
table { id: 1 name: "emb" kind: HASHED dim: 4 capacity: 4096
        push_value_type: FP32 optimizer { name: "sum" } }
)";

// One ps_server (1 apply thread) with --metrics_port=0 and `extra` flags,
// and the metrics address its log names.
struct MetricsServer {
  std::unique_ptr<TestCluster> cluster;
  std::string address;
};
MetricsServer StartMetricsServer(const std::string& tag, uint32_t workers,
                                 std::vector<std::string> extra = {}) {
  ClusterOptions o;
  o.num_servers = 1;
  o.num_workers = workers;
  o.apply_threads = 1;
  o.tables = kTables;
  o.extra_flags = {"--metrics_port=0"};
  o.extra_flags.insert(o.extra_flags.end(), extra.begin(), extra.end());
  MetricsServer m;
  m.cluster = TestCluster::Start(o, tag).value();
  auto address = MetricsAddressFromLog(m.cluster->server(0).log_path(),
                                       10000 * SlowdownFactor());
  EXPECT_TRUE(address.ok()) << address.status();
  if (address.ok()) m.address = *address;
  return m;
}

TEST(ServerMetrics, ScrapeShowsAppliedRows) {
  MetricsServer m = StartMetricsServer("metrics", 2);
  ASSERT_FALSE(m.address.empty());
  {
    auto client = ConnectWorker(*m.cluster, 0);
    ASSERT_TRUE(client.ok()) << client.status();
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 1000; ++k) keys.push_back(k * 7919 + 1);
    std::vector<float> grads(keys.size() * 4, 1.0f);
    ASSERT_TRUE((*client)->Push(1, keys, grads).ok());
    ASSERT_TRUE((*client)->WaitApplied().ok());
  }
  auto text = HttpGet(m.address, "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string& t = *text;
  EXPECT_NE(t.find("# HELP ps_server_rows_applied_total "), std::string::npos);
  EXPECT_NE(t.find("# TYPE ps_server_rows_applied_total counter\n"),
            std::string::npos);
  // Keys that hash to one row are summed by the client: the rows applied
  // are the distinct rows of the 1000 keys.
  const double rows = SampleValue(t,
                                  "ps_server_rows_applied_total{shard=\"0\","
                                  "worker=\"worker-0\"}")
                          .value_or(-1);
  EXPECT_GT(rows, 500) << t;
  EXPECT_LE(rows, 1000) << t;
  EXPECT_EQ(SampleValue(t,
                        "ps_server_rows_applied_total{shard=\"0\","
                        "worker=\"worker-1\"}"),
            0.0);
  EXPECT_EQ(SampleValue(t,
                        "ps_server_table_rows_applied_total{shard=\"0\","
                        "table=\"emb\"}"),
            rows);
  EXPECT_GT(SampleValue(t,
                        "ps_server_push_bytes_total{shard=\"0\","
                        "worker=\"worker-0\"}")
                .value_or(0),
            rows * 16);
  EXPECT_EQ(SampleValue(t,
                        "ps_server_packets_rejected_total{shard=\"0\","
                        "worker=\"worker-0\",reason=\"payload\"}"),
            0.0);
  EXPECT_EQ(SampleValue(t,
                        "ps_server_inbox_packets{shard=\"0\","
                        "worker=\"worker-0\"}"),
            0.0);
  EXPECT_TRUE(SampleValue(t,
                          "ps_server_apply_busy_seconds_total{shard=\"0\","
                          "thread=\"0\"}")
                  .has_value());
  EXPECT_GT(SampleValue(t, "process_resident_memory_bytes").value_or(0), 1e6);
  EXPECT_TRUE(SampleValue(t, "process_cpu_seconds_total").has_value());
  // Every family has HELP and TYPE, and names carry a unit suffix or are
  // counts (checked by eye in the README's list; here: HELP per TYPE).
  size_t helps = 0, types = 0;
  for (size_t at = 0; (at = t.find("# HELP ", at)) != std::string::npos; ++at)
    ++helps;
  for (size_t at = 0; (at = t.find("# TYPE ", at)) != std::string::npos; ++at)
    ++types;
  EXPECT_EQ(helps, types);
  auto missing = HttpGet(m.address, "/nothing");
  EXPECT_FALSE(missing.ok());
  EXPECT_TRUE(m.cluster->Stop().ok());
}

using Clock = std::chrono::steady_clock;

// The exporter's default cap on open connections (ExporterOptions).
constexpr int kConnectionCap = 32;

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                               start)
      .count();
}

// The acceptance of the security review: 200 slowloris connections held
// on the metrics port (each drips a partial request head every 300 ms and
// is re-opened as soon as the server closes it) while a worker pushes; 5
// scrapes each answer in under 1 s, and each shows more rows applied than
// the one before. Before the exporter had its own server, cpp-httplib's 2
// threads sat in the first 2 dripping connections and every scrape waited
// in its unbounded queue until the client gave up.
TEST(ServerMetrics, ScrapesAnswerWhileSlowlorisHoldsThePort) {
  MetricsServer m = StartMetricsServer("slowloris", 1);
  ASSERT_FALSE(m.address.empty());
  auto client = ConnectWorker(*m.cluster, 0);
  ASSERT_TRUE(client.ok()) << client.status();
  auto attack =
      Slowloris::Start(m.address, 200, std::chrono::milliseconds(300));
  ASSERT_TRUE(attack.ok()) << attack.status();
  // Every connection opened and dripping before the first scrape.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const int64_t limit_ms = 1000 * SlowdownFactor();
  double rows_before = 0;
  std::string took_list;
  for (int scrape = 0; scrape < 5; ++scrape) {
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 200; ++k) {
      keys.push_back((scrape * 1000 + k) * 7919 + 1);  // new rows each time
    }
    std::vector<float> grads(keys.size() * 4, 1.0f);
    ASSERT_TRUE((*client)->Push(1, keys, grads).ok());
    ASSERT_TRUE((*client)->WaitApplied().ok());
    const Clock::time_point start = Clock::now();
    auto text = HttpGet(m.address, "/metrics", 3 * limit_ms);
    const int64_t took_ms = MillisSince(start);
    ASSERT_TRUE(text.ok()) << "scrape " << scrape << " after " << took_ms
                           << " ms: " << text.status() << " (attackers opened "
                           << (*attack)->opened() << " connections)";
    EXPECT_LT(took_ms, limit_ms) << "scrape " << scrape;
    took_list += " " + std::to_string(took_ms);
    const double rows = SampleValue(*text,
                                    "ps_server_rows_applied_total{shard=\"0\","
                                    "worker=\"worker-0\"}")
                            .value_or(-1);
    EXPECT_GT(rows, rows_before) << "scrape " << scrape;
    rows_before = rows;
  }
  (*attack)->Stop();
  std::printf(
      "scrapes took (ms):%s; attackers opened %llu connections, "
      "the server closed %llu\n",
      took_list.c_str(), static_cast<unsigned long long>((*attack)->opened()),
      static_cast<unsigned long long>((*attack)->closed_by_server()));
  // The attack was on all along: the server closed dripping connections
  // (to make room, or at the request deadline) and they came back.
  EXPECT_GT((*attack)->closed_by_server(), 0u);
  attack->reset();
  client->reset();
  EXPECT_TRUE(m.cluster->Stop().ok());
}

// 300 connections that send nothing: the server holds at most its cap of
// them (no queue: cpp-httplib accepted every one into its queue, a
// descriptor each), within the first 1.5 s, before any request deadline
// could close one; and a scrape still answers.
TEST(ServerMetrics, IdleConnectionsStayWithinTheCap) {
  MetricsServer m = StartMetricsServer("idle", 1);
  ASSERT_FALSE(m.address.empty());
  ASSERT_TRUE(HttpGet(m.address, "/metrics").ok());  // settles what it opens
  const pid_t pid = m.cluster->server(0).pid();
  const int before = OpenDescriptors(pid);
  ASSERT_GT(before, 0);
  auto idle = OpenIdleConnections(m.address, 300);
  ASSERT_TRUE(idle.ok()) << idle.status();
  int most = before;
  for (int i = 0; i < 15; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    most = std::max(most, OpenDescriptors(pid));
    if (i == 7) {
      const Clock::time_point start = Clock::now();
      auto text = HttpGet(m.address, "/metrics", 3000 * SlowdownFactor());
      EXPECT_TRUE(text.ok()) << text.status();
      EXPECT_LT(MillisSince(start), 1000 * SlowdownFactor());
    }
  }
  // A few for the scrape's own reads of /proc and the connection.
  EXPECT_LE(most, before + kConnectionCap + 4)
      << "descriptors: " << before << " before 300 idle connections";
  idle->clear();
  EXPECT_TRUE(m.cluster->Stop().ok());
}

// --metrics_host is where the endpoint listens: 127.0.0.2 serves there and
// not on 127.0.0.1.
TEST(ServerMetrics, MetricsHostIsWhereItListens) {
  MetricsServer m =
      StartMetricsServer("metrics-host", 1, {"--metrics_host=127.0.0.2"});
  ASSERT_FALSE(m.address.empty());
  ASSERT_EQ(m.address.rfind("127.0.0.2:", 0), 0u) << m.address;
  EXPECT_TRUE(HttpGet(m.address, "/metrics").ok());
  const std::string port = m.address.substr(m.address.find(':') + 1);
  EXPECT_FALSE(HttpGet("127.0.0.1:" + port, "/metrics", 2000).ok());
  EXPECT_TRUE(m.cluster->Stop().ok());
}

// Runs `argv` and returns its exit code (it must exit by itself within
// 20 s) and its log.
std::pair<int, std::string> RunProgram(const std::vector<std::string>& argv,
                                       const std::string& dir) {
  launch::ProcessSpec spec;
  spec.argv = argv;
  spec.log_path = dir + "/program.log";
  spec.name = "program";
  auto p = launch::Process::Spawn(spec);
  if (!p.ok()) return {-1, p.status().ToString()};
  std::optional<int> code = (*p)->WaitExit(20000 * SlowdownFactor());
  if (!code) (void)(*p)->Stop(SIGKILL, 1000);
  return {code.value_or(-1), launch::FileTail(spec.log_path, 4000)};
}

// "--name=value" (built step by step: GCC 12 sees phantom overflows in
// string concatenations inside initializer lists).
std::string Flag(const char* name, const std::string& value) {
  std::string f = "--";
  f += name;
  f += '=';
  f += value;
  return f;
}

// A port some other socket listens on (closed by the caller).
int ListeningPort(int* fd_out) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(fd, 1) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *fd_out = fd;
  return ntohs(a.sin_port);
}

// `program` (its flags but the port) refuses a port out of range (exit 2)
// and one in use (exit 1), each with a message that names it; and a
// --metrics_host that is no address (exit 2), as kubelet leaves an
// undefined $(POD_IP), naming it.
void ExpectBadEndpointsRefused(const std::vector<std::string>& program,
                               const std::string& out_of_range,
                               const std::string& dir) {
  auto argv = program;
  argv.push_back("--metrics_port=" + out_of_range);
  auto [code, log] = RunProgram(argv, dir);
  EXPECT_EQ(code, 2) << log;
  EXPECT_NE(log.find("--metrics_port must be"), std::string::npos) << log;
  int fd = -1;
  const int port = ListeningPort(&fd);
  ASSERT_GT(port, 0);
  argv = program;
  argv.push_back(Flag("metrics_port", std::to_string(port)));
  std::tie(code, log) = RunProgram(argv, dir);
  close(fd);
  EXPECT_EQ(code, 1) << log;
  EXPECT_NE(
      log.find("cannot serve metrics on 127.0.0.1:" + std::to_string(port)),
      std::string::npos)
      << log;
  argv = program;
  argv.push_back("--metrics_port=0");
  argv.push_back("--metrics_host=$(POD_IP)");
  std::tie(code, log) = RunProgram(argv, dir);
  EXPECT_EQ(code, 2) << log;
  EXPECT_NE(log.find("--metrics_host: metrics host '$(POD_IP)' is no address"),
            std::string::npos)
      << log;
}

TEST(WorkerMetrics, BadEndpointIsAClearError) {
  auto dir = ScratchDir::Create("metrics-port").value();
  const std::string tables = dir->WriteFile("t.tables", kTables).value();
  const std::string data = dir->WriteFile("train.tsv", "1\t1\n").value();
  ExpectBadEndpointsRefused({PS_WORKER_BIN, "--local", Flag("tables", tables),
                             Flag("train_data", data)},
                            "-7", dir->path());
}

TEST(ServerMetrics, BadEndpointIsAClearError) {
  auto dir = ScratchDir::Create("metrics-port").value();
  const std::string tables = dir->WriteFile("t.tables", kTables).value();
  ExpectBadEndpointsRefused({PS_SERVER_BIN, Flag("tables", tables)}, "70000",
                            dir->path());
}

// Without --metrics_host the endpoint is on loopback even when the server
// listens on every interface (--listen_host=0.0.0.0, which needs a cluster
// secret): it used to bind --listen_host, putting unauthenticated metrics
// on the network. Where the host has an address of its own (the one the
// server advertises), the metrics port is not reachable there.
TEST(ServerMetrics, DefaultsToLoopbackWhateverListenHost) {
  auto dir = ScratchDir::Create("metrics-default").value();
  const std::string tables = dir->WriteFile("t.tables", kTables).value();
  const std::string secret =
      dir->WriteFile("cluster.key", "0123456789abcdef0123456789abcdef").value();
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  launch::ProcessSpec spec;
  spec.argv = {PS_SERVER_BIN, Flag("tables", tables), "--listen_host=0.0.0.0",
               Flag("cluster_secret_file", secret), "--metrics_port=0"};
  spec.log_path = dir->path() + "/server.log";
  spec.name = "server";
  auto server = launch::Process::Spawn(spec);
  ASSERT_TRUE(server.ok()) << server.status();
  auto address = MetricsAddressFromLog(spec.log_path, 10000 * SlowdownFactor());
  ASSERT_TRUE(address.ok())
      << address.status() << launch::FileTail(spec.log_path, 4000);
  EXPECT_EQ(address->rfind("127.0.0.1:", 0), 0u) << *address;
  EXPECT_TRUE(HttpGet(*address, "/metrics").ok());
  // "ready: control HOST:PORT": the address peers are told.
  const std::string log = launch::FileTail(spec.log_path, 16000);
  const std::string marker = "ready: control ";
  const size_t at = log.find(marker);
  ASSERT_NE(at, std::string::npos) << log;
  const size_t host_start = at + marker.size();
  const std::string host =
      log.substr(host_start, log.find(':', host_start) - host_start);
  if (host.rfind("127.", 0) != 0 && host.find(':') == std::string::npos) {
    const std::string port = address->substr(address->find(':') + 1);
    EXPECT_FALSE(HttpGet(host + ":" + port, "/metrics", 2000).ok())
        << "metrics reachable at " << host;
  }
  auto code = (*server)->Stop(SIGTERM, 20000 * SlowdownFactor());
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << launch::FileTail(spec.log_path, 4000);
}

}  // namespace
}  // namespace ps::testing
