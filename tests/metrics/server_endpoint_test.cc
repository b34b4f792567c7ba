// ps_server's --metrics_port against a real process: a worker pushes into a
// 1-shard cluster, a GET of /metrics shows the rows it applied (per worker
// and per table), the rejection counters at 0, inbox and apply-thread
// metrics and the process's RSS; other paths answer 404. A bad
// --metrics_port is a clear error, of ps_server and of ps_worker alike: out
// of range exits 2, a port in use 1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "launch/process.h"
#include "launch/text_file.h"
#include "tests/metrics/metrics_test_util.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

constexpr char kTables[] = R"(
table { id: 1 name: "emb" kind: HASHED dim: 4 capacity: 4096
        push_value_type: FP32 optimizer { name: "sum" } }
)";

TEST(ServerMetrics, ScrapeShowsAppliedRows) {
  ClusterOptions o;
  o.num_servers = 1;
  o.num_workers = 2;
  o.apply_threads = 1;
  o.tables = kTables;
  o.extra_flags = {"--metrics_port=0"};
  auto cluster = TestCluster::Start(o, "metrics").value();
  auto address = MetricsAddressFromLog(cluster->server(0).log_path(),
                                       10000 * SlowdownFactor());
  ASSERT_TRUE(address.ok()) << address.status();
  {
    auto client = ConnectWorker(*cluster, 0);
    ASSERT_TRUE(client.ok()) << client.status();
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 1000; ++k) keys.push_back(k * 7919 + 1);
    std::vector<float> grads(keys.size() * 4, 1.0f);
    ASSERT_TRUE((*client)->Push(1, keys, grads).ok());
    ASSERT_TRUE((*client)->WaitApplied().ok());
  }
  auto text = HttpGet(*address, "/metrics");
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
  auto missing = HttpGet(*address, "/nothing");
  EXPECT_FALSE(missing.ok());
  EXPECT_TRUE(cluster->Stop().ok());
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
// and one in use (exit 1), each with a message that names it.
void ExpectBadPortsRefused(const std::vector<std::string>& program,
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
}

TEST(WorkerMetrics, BadPortIsAClearError) {
  auto dir = ScratchDir::Create("metrics-port").value();
  const std::string tables = dir->WriteFile("t.tables", kTables).value();
  const std::string data = dir->WriteFile("train.tsv", "1\t1\n").value();
  ExpectBadPortsRefused({PS_WORKER_BIN, "--local", Flag("tables", tables),
                         Flag("train_data", data)},
                        "-7", dir->path());
}

TEST(ServerMetrics, BadPortIsAClearError) {
  auto dir = ScratchDir::Create("metrics-port").value();
  const std::string tables = dir->WriteFile("t.tables", kTables).value();
  ExpectBadPortsRefused({PS_SERVER_BIN, Flag("tables", tables)}, "70000",
                        dir->path());
}

}  // namespace
}  // namespace ps::testing
