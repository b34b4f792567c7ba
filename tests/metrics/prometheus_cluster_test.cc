// Acceptance: a real Prometheus (Debian's `prometheus`, which
// scripts/setup.sh installs) scrapes a running cluster of 2 ps_server and 2
// ps_worker processes on loopback, all with --metrics_port=0, every 500 ms;
// the test asks its HTTP API (/api/v1/query):
//   - the applied-rows counter of each shard is positive, is scraped at
//     least twice and increases;
//   - the rejected-packets counter of a shard rises after a garbage packet
//     is written into one of its inboxes (as worker 2, whose inbox no
//     trainer uses, through the xfer core);
//   - the training AUC series exists for both workers, and so does the
//     quantization error of their (fp16) pushes;
//   - every query of every panel of the Grafana dashboard
//     (deploy/grafana/ps_dashboard.json) answers at least one series with
//     a number, so the dashboard cannot drift from the metrics. The servers
//     checkpoint every 200 steps for its checkpoint panels (worker 2 sets
//     its clock word past every step first, so that the trainers' cuts do
//     not wait for it).
// Prometheus, the workers and the servers are stopped afterwards (their
// Process objects stop them whatever happens); every socket is 127.0.0.1.
// Without the prometheus binary the test fails (CI installs it).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/context.h"
#include "launch/process.h"
#include "launch/text_file.h"
#include "protocol/control_channel.h"
#include "protocol/inbox_ring.h"
#include "protocol/status_words.h"
#include "tests/metrics/metrics_test_util.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

namespace pb = google::protobuf;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kServers = 2;
constexpr uint32_t kTrainers = 2;
constexpr uint32_t kIntruder = 2;  // worker id of the garbage writer
constexpr uint32_t kWorkers = 3;

// The dashboard's disk-tier panels need a table with one (idle here: its
// series read 0).
constexpr char kTables[] = R"(
table { id: 1 name: "emb" kind: HASHED dim: 1 capacity: 65536
        push_value_type: FP16 optimizer { name: "sgd" learning_rate: 0.05 } }
table { id: 2 name: "tiered" kind: EXACT dim: 1 capacity: 1000
        admit_after_pushes: 1 when_full: WHEN_FULL_MOVE_TO_DISK
        optimizer { name: "sgd" learning_rate: 0.05 } }
)";

std::string PrometheusBinary() {
  for (const char* p : {"/usr/bin/prometheus", "/usr/local/bin/prometheus"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// Criteo-shaped lines whose label depends on two categorical fields, so the
// model learns something (the AUC is a number, not a constant).
std::string TrainingData(size_t lines) {
  std::mt19937_64 rng(7);
  std::string out;
  for (size_t i = 0; i < lines; ++i) {
    const uint32_t a = rng() % 50, b = rng() % 50;
    const bool click = (a < 15) != (rng() % 10 == 0);
    char field[32];
    out += click ? "1" : "0";
    for (int f = 0; f < 13; ++f) {
      std::snprintf(field, sizeof(field), "\t%u", unsigned(rng() % 20));
      out += field;
    }
    std::snprintf(field, sizeof(field), "\t%ua\t%ub", a, b);
    out += field;
    for (int f = 2; f < 26; ++f) {
      std::snprintf(field, sizeof(field), "\t%u", unsigned(rng() % 200));
      out += field;
    }
    out += "\n";
  }
  return out;
}

// /api/v1/query?query=... -> {labels of the series -> value}.
StatusOr<std::map<std::string, double>> Query(const std::string& prometheus,
                                              const std::string& promql) {
  std::string escaped;
  for (unsigned char c : promql) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
      escaped.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      escaped += buf;
    }
  }
  PS_ASSIGN_OR_RETURN(std::string body,
                      HttpGet(prometheus, "/api/v1/query?query=" + escaped));
  pb::Struct json;
  if (!pb::util::JsonStringToMessage(body, &json).ok()) {
    return Corruption("not JSON: " + body);
  }
  const auto& f = json.fields();
  if (!f.contains("status") || f.at("status").string_value() != "success") {
    return Internal("query " + promql + " failed: " + body);
  }
  std::map<std::string, double> out;
  for (const pb::Value& r : f.at("data")
                                .struct_value()
                                .fields()
                                .at("result")
                                .list_value()
                                .values()) {
    std::string key;
    for (const auto& [k, v] :
         r.struct_value().fields().at("metric").struct_value().fields()) {
      if (k == "__name__" || k == "instance" || k == "job") continue;
      key += k + "=" + v.string_value() + ",";
    }
    const auto& value =
        r.struct_value().fields().at("value").list_value().values();
    if (value.size() == 2) out[key] = std::stod(value[1].string_value());
  }
  return out;
}

// Polls `promql` until `ok(result)` or `timeout_ms`; the last result.
std::map<std::string, double> WaitFor(
    const std::string& prometheus, const std::string& promql,
    const std::function<bool(const std::map<std::string, double>&)>& ok,
    int timeout_ms, std::string* error) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::map<std::string, double> last;
  while (true) {
    auto r = Query(prometheus, promql);
    if (r.ok()) {
      last = *r;
      if (ok(last)) return last;
      *error = "";
    } else {
      *error = r.status().ToString();
    }
    if (Clock::now() > deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// One query of a dashboard panel, Grafana's variables substituted.
struct PanelQuery {
  std::string panel;  // "<title> (<refId>)", for the failure message
  std::string promql;
};

// Replaces every `$name`, `${name}` and `${name:format}` in `expr` by
// `value`; a `$name` followed by more of a name (`$jobs` for `$job`) is
// left alone.
std::string Substitute(std::string expr, const std::string& name,
                       const std::string& value) {
  for (size_t at = expr.find('$'); at != std::string::npos;
       at = expr.find('$', at)) {
    size_t end = std::string::npos;
    if (expr.compare(at + 1, name.size() + 1, "{" + name) == 0) {
      const size_t after = at + 2 + name.size();
      if (after < expr.size() && (expr[after] == '}' || expr[after] == ':')) {
        end = expr.find('}', after);
        if (end != std::string::npos) ++end;
      }
    } else if (expr.compare(at + 1, name.size(), name) == 0) {
      end = at + 1 + name.size();
      if (end < expr.size() &&
          (std::isalnum(static_cast<unsigned char>(expr[end])) ||
           expr[end] == '_')) {
        end = std::string::npos;
      }
    }
    if (end == std::string::npos) {
      ++at;
      continue;
    }
    expr.replace(at, end - at, value);
    at += value.size();
  }
  return expr;
}

// The dashboard's panels' queries, rows' nested panels included, with
// Grafana's interval variables as 1m (the test's scrapes, 500 ms apart,
// put plenty of samples in it) and the dashboard's own variables as their
// "All" value (a regex matching every value). A panel without a query, or
// a query with a variable left over, is an error: the test could not run
// what Grafana would.
StatusOr<std::vector<PanelQuery>> DashboardQueries(const std::string& path) {
  const std::optional<std::string> text = launch::ReadWholeFile(path);
  if (!text) return NotFound("cannot read " + path);
  pb::Struct dash;
  if (!pb::util::JsonStringToMessage(*text, &dash).ok()) {
    return Corruption(path + ": not JSON");
  }
  std::vector<std::pair<std::string, std::string>> vars = {
      {"__rate_interval", "1m"}, {"__interval", "1m"}, {"__range", "1m"}};
  const auto& top = dash.fields();
  if (top.contains("templating")) {
    const auto& t = top.at("templating").struct_value().fields();
    if (t.contains("list")) {
      for (const pb::Value& v : t.at("list").list_value().values()) {
        const auto& f = v.struct_value().fields();
        if (!f.contains("name")) continue;
        const bool custom_all =
            f.contains("allValue") && !f.at("allValue").string_value().empty();
        vars.emplace_back(f.at("name").string_value(),
                          custom_all ? f.at("allValue").string_value() : ".*");
      }
    }
  }
  std::vector<PanelQuery> out;
  std::function<Status(const pb::Value&)> add_panels =
      [&](const pb::Value& list) -> Status {
    for (const pb::Value& p : list.list_value().values()) {
      const auto& f = p.struct_value().fields();
      const std::string title =
          f.contains("title") ? f.at("title").string_value() : "(untitled)";
      if (f.contains("type") && f.at("type").string_value() == "row") {
        if (f.contains("panels"))
          PS_RETURN_IF_ERROR(add_panels(f.at("panels")));
        continue;
      }
      size_t queries = 0;
      if (f.contains("targets")) {
        for (const pb::Value& t : f.at("targets").list_value().values()) {
          const auto& tf = t.struct_value().fields();
          if (!tf.contains("expr")) continue;
          std::string expr = tf.at("expr").string_value();
          for (const auto& [name, value] : vars) {
            expr = Substitute(expr, name, value);
          }
          const std::string ref =
              tf.contains("refId") ? tf.at("refId").string_value() : "?";
          const std::string panel = "panel \"" + title + "\" (" + ref + ")";
          if (expr.find('$') != std::string::npos) {
            return InvalidArgument(panel + ": a variable the test does not " +
                                   "know is left in " + expr);
          }
          out.push_back({panel, expr});
          ++queries;
        }
      }
      if (queries == 0) {
        return InvalidArgument("panel \"" + title + "\" has no query");
      }
    }
    return Status::OK();
  };
  if (!top.contains("panels")) return InvalidArgument(path + ": no panels");
  PS_RETURN_IF_ERROR(add_panels(top.at("panels")));
  return out;
}

std::string Show(const std::map<std::string, double>& m) {
  std::string s = "{";
  for (const auto& [k, v] : m) s += k + ": " + std::to_string(v) + "; ";
  return s + "}";
}

// Says hello as worker kIntruder to shard `shard`, connects to its xfer
// address and runs `act` on that endpoint.
Status AsIntruder(const TestCluster& cluster, uint32_t shard,
                  const std::function<Status(xfer::Endpoint&,
                                             const proto::ClusterInfo&)>& act) {
  xfer::ContextOptions options;
  options.name = "intruder";
  options.transport = cluster.options().transport;
  PS_ASSIGN_OR_RETURN(auto ctx, xfer::Context::Create(options));
  PS_ASSIGN_OR_RETURN(auto control, protocol::ControlClient::Connect(
                                        cluster.addresses()[shard],
                                        {.timeout_ms = 10000, .secret = {}}));
  proto::ControlRequest hello;
  hello.mutable_hello()->set_worker_id(kIntruder);
  hello.mutable_hello()->set_num_workers(kWorkers);
  hello.mutable_hello()->set_name("worker-2");
  PS_ASSIGN_OR_RETURN(proto::ControlReply reply, control.Call(hello));
  if (!reply.has_cluster()) return Internal("hello without cluster info");
  const proto::ClusterInfo& info = reply.cluster();
  PS_ASSIGN_OR_RETURN(auto ep, ctx->Connect(info.xfer_address()));
  return act(*ep, info);
}

// Sets worker kIntruder's clock word on shard 0 past any step, so the
// trainers' checkpoint barriers, which wait for every worker's clock, do
// not wait for a worker that never trains. (The servers only read clock
// words, and keep them when a worker disconnects.)
Status ReleaseIntruderClock(const TestCluster& cluster) {
  return AsIntruder(
      cluster, 0,
      [](xfer::Endpoint& ep, const proto::ClusterInfo& info) -> Status {
        PS_ASSIGN_OR_RETURN(xfer::RemoteRegion status,
                            ep.Import(info.status_region()));
        const uint64_t clock = uint64_t{1} << 62;
        PS_RETURN_IF_ERROR(
            ep.Put(&clock, sizeof(clock), status,
                   protocol::StatusWords{kWorkers}.ClockOffset(kIntruder)));
        return ep.Flush();
      });
}

// Writes, as worker kIntruder, random bytes into its inbox's first slot on
// shard `shard` with a valid sequence word.
Status WriteGarbage(const TestCluster& cluster, uint32_t shard) {
  return AsIntruder(
      cluster, shard,
      [](xfer::Endpoint& ep, const proto::ClusterInfo& info) -> Status {
        PS_ASSIGN_OR_RETURN(xfer::RemoteRegion inbox,
                            ep.Import(info.inbox_region()));
        std::mt19937_64 rng(4242);
        std::vector<uint8_t> junk(8 + 200);
        for (auto& b : junk) b = static_cast<uint8_t>(rng());
        const uint32_t length = 200;
        std::memcpy(junk.data(), &length, 4);
        std::memset(junk.data() + 4, 0, 4);
        const uint64_t slot =
            protocol::SlotOffset(1, info.inbox_slots(), info.slot_bytes());
        PS_RETURN_IF_ERROR(ep.PutWithNotify(junk.data(), junk.size(), inbox,
                                            slot + 8, inbox, slot, 1));
        return ep.Flush();
      });
}

TEST(PrometheusCluster, ScrapesAppliedRejectedAndAuc) {
  const std::string prometheus_bin = PrometheusBinary();
  ASSERT_FALSE(prometheus_bin.empty())
      << "the prometheus binary is missing: scripts/setup.sh installs "
         "Debian's prometheus";
  // Checkpoints for the dashboard's checkpoint panels: every 200 steps of
  // the workers (the first within about a second; each pauses training a
  // little); none on exit, which would only slow the stop down.
  auto checkpoints = ScratchDir::Create("prometheus-checkpoints");
  ASSERT_TRUE(checkpoints.ok()) << checkpoints.status();
  ClusterOptions o;
  o.num_servers = kServers;
  o.num_workers = kWorkers;
  o.apply_threads = 1;
  o.tables = kTables;
  o.extra_flags = {"--metrics_port=0",
                   "--checkpoint_dir=" + (*checkpoints)->path(),
                   "--checkpoint_every_steps=200", "--checkpoint_on_exit=false",
                   "--disk_tier_dir=" + (*checkpoints)->path() + "/tier"};
  auto cluster_or = TestCluster::Start(o, "prometheus");
  ASSERT_TRUE(cluster_or.ok()) << cluster_or.status();
  auto& cluster = *cluster_or;
  const std::string dir = cluster->dir();
  std::vector<std::string> targets_server, targets_worker;
  for (uint32_t s = 0; s < kServers; ++s) {
    auto a = MetricsAddressFromLog(cluster->server(s).log_path(), 10000);
    ASSERT_TRUE(a.ok()) << a.status();
    targets_server.push_back(*a);
  }
  {
    const Status released = ReleaseIntruderClock(*cluster);
    ASSERT_TRUE(released.ok()) << released;
  }
  {
    std::ofstream data(dir + "/train.tsv");
    data << TrainingData(30000);
  }
  std::string servers;
  for (const auto& a : cluster->addresses()) {
    servers += (servers.empty() ? "" : ",") + a;
  }
  std::vector<std::unique_ptr<launch::Process>> workers;
  for (uint32_t w = 0; w < kTrainers; ++w) {
    launch::ProcessSpec spec;
    spec.argv = {PS_WORKER_BIN,
                 "--model=lr",
                 "--sparse_table=emb",
                 "--train_data=" + dir + "/train.tsv",
                 "--servers=" + servers,
                 "--worker_id=" + std::to_string(w),
                 "--num_workers=" + std::to_string(kWorkers),
                 "--batch_size=300",
                 "--epochs=100000",
                 "--eval_worker=-1",
                 "--progress_secs=0",
                 "--transport=" + TransportFlag(o.transport),
                 "--metrics_port=0"};
    spec.log_path = dir + "/worker-" + std::to_string(w) + ".log";
    spec.name = "worker-" + std::to_string(w);
    auto p = launch::Process::Spawn(spec);
    ASSERT_TRUE(p.ok()) << p.status();
    workers.push_back(std::move(*p));
  }
  for (auto& w : workers) {
    auto a = MetricsAddressFromLog(w->log_path(), 20000);
    ASSERT_TRUE(a.ok()) << a.status() << "\n"
                        << launch::FileTail(w->log_path(), 3000);
    targets_worker.push_back(*a);
  }

  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v) s += (s.empty() ? "'" : ", '") + a + "'";
    return "[" + s + "]";
  };
  {
    std::ofstream config(dir + "/prometheus.yml");
    config << "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n"
           << "scrape_configs:\n"
           << "  - job_name: ps_server\n    static_configs:\n"
           << "      - targets: " << list(targets_server) << "\n"
           << "  - job_name: ps_worker\n    static_configs:\n"
           << "      - targets: " << list(targets_worker) << "\n";
  }
  launch::ProcessSpec spec;
  spec.log_path = dir + "/prometheus.log";
  spec.name = "prometheus";
  // Prometheus binds its port a moment after FreeLoopbackPort saw it free,
  // and a test running beside this one may take it first: Prometheus then
  // exits at once ("address already in use"), and another port is tried.
  std::unique_ptr<launch::Process> prom;
  std::string prometheus;
  for (int attempt = 0; attempt < 5 && prom == nullptr; ++attempt) {
    auto port = FreeLoopbackPort();
    ASSERT_TRUE(port.ok()) << port.status();
    prometheus = "127.0.0.1:" + std::to_string(*port);
    spec.argv = {prometheus_bin, "--config.file=" + dir + "/prometheus.yml",
                 "--storage.tsdb.path=" + dir + "/tsdb",
                 "--web.listen-address=" + prometheus, "--log.level=warn"};
    auto started = launch::Process::Spawn(spec);
    ASSERT_TRUE(started.ok()) << started.status();
    bool exited = false;
    for (int waited_ms = 0; waited_ms < 30000 && !exited; waited_ms += 100) {
      if (HttpGet(prometheus, "/-/ready").ok()) {
        prom = std::move(*started);
        break;
      }
      exited = (*started)->WaitExit(100).has_value();
    }
    const std::string log = launch::FileTail(spec.log_path, 2000);
    ASSERT_TRUE(
        prom != nullptr ||
        (exited && log.find("address already in use") != std::string::npos))
        << "prometheus did not get ready:\n"
        << log;
  }
  ASSERT_TRUE(prom != nullptr) << "no free port for prometheus in 5 tries";
  const auto tail = [&] {
    return "\nprometheus log:\n" + launch::FileTail(spec.log_path, 2000);
  };
  std::string error;

  // Applied rows: each shard positive, scraped at least twice ...
  const std::string rows = "sum by (shard) (ps_server_rows_applied_total)";
  auto first = WaitFor(
      prometheus,
      "min by (shard) (count_over_time(ps_server_rows_applied_total[1m]))",
      [](const auto& r) {
        if (r.size() != kServers) return false;
        for (const auto& [k, v] : r) {
          if (v < 2) return false;
        }
        return true;
      },
      15000, &error);
  ASSERT_EQ(first.size(), kServers) << error << Show(first) << tail();
  first = WaitFor(
      prometheus, rows,
      [](const auto& r) {
        if (r.size() != kServers) return false;
        for (const auto& [k, v] : r) {
          if (v <= 0) return false;
        }
        return true;
      },
      10000, &error);
  ASSERT_EQ(first.size(), kServers) << error << Show(first) << tail();
  for (const auto& [k, v] : first) EXPECT_GT(v, 0) << k;
  // ... and increasing.
  auto later = WaitFor(
      prometheus, rows,
      [&](const auto& r) {
        if (r.size() != kServers) return false;
        for (const auto& [k, v] : r) {
          if (!first.contains(k) || v <= first.at(k)) return false;
        }
        return true;
      },
      10000, &error);
  for (const auto& [k, v] : first) {
    EXPECT_GT(later[k], v) << k << " did not increase: " << Show(later)
                           << error;
  }

  // Rejected: 0 on shard 0 until a garbage packet lands in its inbox.
  const std::string rejected =
      "sum by (shard) (ps_server_packets_rejected_total)";
  auto before = WaitFor(
      prometheus, rejected, [](const auto& r) { return r.size() == kServers; },
      5000, &error);
  ASSERT_EQ(before.size(), kServers) << error << Show(before);
  EXPECT_EQ(before["shard=0,"], 0) << Show(before);
  ASSERT_TRUE(WriteGarbage(*cluster, 0).ok());
  auto after = WaitFor(
      prometheus, rejected,
      [](const auto& r) {
        return r.contains("shard=0,") && r.at("shard=0,") > 0;
      },
      10000, &error);
  EXPECT_EQ(after["shard=0,"], 1) << error << Show(after);
  auto by_sender =
      Query(prometheus, "ps_server_packets_rejected_total{shard=\"0\"} > 0");
  ASSERT_TRUE(by_sender.ok()) << by_sender.status();
  EXPECT_EQ(by_sender->size(), 1u) << Show(*by_sender);
  if (!by_sender->empty()) {
    EXPECT_NE(by_sender->begin()->first.find("worker=worker-2"),
              std::string::npos)
        << Show(*by_sender);
  }

  // The training AUC of both workers.
  auto auc = WaitFor(
      prometheus, "ps_train_auc",
      [](const auto& r) { return r.size() == kTrainers; }, 10000, &error);
  EXPECT_EQ(auc.size(), kTrainers) << error << Show(auc) << tail();
  for (const auto& [k, v] : auc) {
    EXPECT_GE(v, 0) << k;
    EXPECT_LE(v, 1) << k;
  }

  // The kernels' quantization error of the fp16 pushes: small, not zero.
  auto quant = WaitFor(
      prometheus, "ps_worker_quantization_relative_l2_error",
      [](const auto& r) { return r.size() == kTrainers; }, 5000, &error);
  EXPECT_EQ(quant.size(), kTrainers) << error << Show(quant);
  for (const auto& [k, v] : quant) {
    EXPECT_NE(k.find("table=emb"), std::string::npos) << k;
    EXPECT_GT(v, 0) << k;
    EXPECT_LT(v, 1e-2) << k;
  }

  // Every query of every panel of the dashboard: a series with a number.
  // (Most answer at once; the checkpoint panels wait for the first commit.)
  auto dashboard = DashboardQueries(PS_GRAFANA_DASHBOARD);
  ASSERT_TRUE(dashboard.ok()) << dashboard.status();
  EXPECT_FALSE(dashboard->empty());
  const auto dashboard_deadline = Clock::now() + std::chrono::seconds(20);
  for (const PanelQuery& q : *dashboard) {
    const int left_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(
               dashboard_deadline - Clock::now())
               .count()));
    auto r = WaitFor(
        prometheus, q.promql,
        [](const auto& series) {
          for (const auto& [k, v] : series) {
            if (std::isfinite(v)) return true;
          }
          return false;
        },
        left_ms, &error);
    EXPECT_TRUE(
        std::any_of(r.begin(), r.end(),
                    [](const auto& kv) { return std::isfinite(kv.second); }))
        << q.panel << ": no series with a number for " << q.promql << " "
        << Show(r) << " " << error;
  }

  // Stop everything: Prometheus, the workers (still training), the servers.
  EXPECT_TRUE(prom->Stop(SIGTERM, 10000).ok());
  for (auto& w : workers) (void)w->Stop(SIGTERM, 10000);
  EXPECT_TRUE(cluster->Stop().ok());
}

}  // namespace
}  // namespace ps::testing
