// ps_ctl status against real ps_server processes (tests/ps harness): a
// cluster of 2 servers and 2 workers, of which worker 0 is this test (a
// PsClient that pushes and clocks) and worker 1 never comes. ps_ctl must
// show both servers, worker 0's clock and applied packets, worker 1 as not
// seen; worker 0 as gone (a lost peer) once its client closed; then, with
// server 1 killed by SIGKILL, server 1 as lost (exit 3) while server 0 is
// still shown; and with server 0 stopped by SIGSTOP (it accepts but never
// answers), return within --timeout_ms all the same. Also --help and
// --version of ps_server and ps_ctl, and ps_ctl's usage errors.
//
// Thread-safety: one test thread; the programs are child processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/ps/ps_cluster.h"
#include "tests/train/run_program.h"

namespace ps::testing {
namespace {

constexpr uint32_t kTable = 1;
constexpr char kTables[] = R"(
table { id: 1 name: "ctl" kind: HASHED dim: 4 capacity: 1000
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
)";

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class PsCtlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ScratchDir::Create("ps-ctl");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }
  std::string Path(const std::string& name) const {
    return dir_->path() + "/" + name;
  }
  // ps_ctl status with `flags`; its output (stdout and stderr) and status.
  Outcome Ctl(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {PS_CTL_BIN};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunProgram(argv, Path("ctl.log"), 30);
  }
  std::unique_ptr<ScratchDir> dir_;
};

TEST_F(PsCtlTest, LiveClusterThenAWorkerGoneAServerKilledAndOneStuck) {
  ClusterOptions o;
  o.num_servers = 2;
  o.num_workers = 2;
  o.apply_threads = 1;
  o.tables = kTables;
  // No final checkpoint on stop: server 0 stops alone (server 1 is killed).
  o.extra_flags = {"--checkpoint_dir=" + Path("ckpt"),
                   "--checkpoint_on_exit=false"};
  auto cluster = TestCluster::Start(o, "ctl");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::vector<std::string>& addr = (*cluster)->addresses();
  const std::string servers = "--servers=" + addr[0] + "," + addr[1];

  // Worker 0: three steps of pushes.
  auto client = ConnectWorker(**cluster, 0);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= 64; ++k) keys.push_back(k * 7919);
  const std::vector<float> grads(keys.size() * 4, 1.0f);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*client)->Push(kTable, keys, grads).ok());
    ASSERT_TRUE((*client)->Clock().ok());
  }

  // The pushes are applied by now or soon: ask until they are.
  Outcome json;
  const std::string worker0 =
      "{\"worker_id\": 0, \"state\": \"connected\", \"clock\": 3, "
      "\"packets_applied\": ";
  for (int i = 0; i < 100; ++i) {
    json = Ctl({"status", servers, "--json"});
    if (json.code == 0 && Has(json.output, worker0) &&
        !Has(json.output, worker0 + "0,")) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(json.code, 0) << json.output;
  EXPECT_TRUE(Has(json.output, worker0)) << json.output;
  EXPECT_FALSE(Has(json.output, worker0 + "0,")) << json.output;
  EXPECT_TRUE(Has(json.output, "\"lost_servers\": 0")) << json.output;
  EXPECT_TRUE(Has(json.output, "\"worker_id\": 1, \"state\": \"not seen\""))
      << json.output;
  EXPECT_TRUE(Has(json.output, "\"checkpoint_dir\": \"" + Path("ckpt")))
      << json.output;
  EXPECT_TRUE(Has(json.output, "\"version\": \"" PS_VERSION "\""))
      << json.output;

  // The human screen: both servers serving, the workers, nothing lost.
  Outcome text = Ctl({"status", servers});
  EXPECT_EQ(text.code, 0) << text.output;
  for (const std::string& part :
       {std::string("SHARD"), addr[0], addr[1], std::string("serving"),
        std::string("WORKER"), std::string("connected"),
        std::string("not seen"), std::string("latest checkpoint: none"),
        std::string("lost peers: none")}) {
    EXPECT_TRUE(Has(text.output, part)) << part << " in\n" << text.output;
  }

  // Worker 0 leaves: it is gone, a lost peer, but every server answered.
  client->reset();
  for (int i = 0; i < 100; ++i) {
    text = Ctl({"status", servers});
    if (Has(text.output, "worker 0: no control connection")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(text.code, 0) << text.output;
  EXPECT_TRUE(Has(text.output, "lost peers: 1")) << text.output;
  EXPECT_TRUE(Has(text.output, "worker 0: no control connection"))
      << text.output;

  // Server 1 killed: reported lost, server 0 still shown, exit 3, at once
  // (its port refuses).
  ASSERT_EQ(kill((*cluster)->server(1).pid(), SIGKILL), 0);
  for (int i = 0; i < 100 && !(*cluster)->server(1).Exited(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  text = Ctl({"status", servers, "--timeout_ms=2000"});
  EXPECT_EQ(text.code, 3) << text.output;
  // Not hanging, with room for a loaded machine (timing is not the test).
  EXPECT_LT(text.seconds, 10 * SlowdownFactor()) << text.output;
  EXPECT_TRUE(Has(text.output, "1 lost")) << text.output;
  EXPECT_TRUE(Has(text.output, "LOST")) << text.output;
  EXPECT_TRUE(Has(text.output, "server " + addr[1] + ":")) << text.output;
  EXPECT_TRUE(Has(text.output, "serving")) << text.output;  // server 0
  json = Ctl({"status", servers, "--timeout_ms=2000", "--json"});
  EXPECT_EQ(json.code, 3) << json.output;
  EXPECT_TRUE(Has(json.output, "\"lost_servers\": 1")) << json.output;
  EXPECT_TRUE(Has(json.output,
                  "{\"kind\": \"server\", \"address\": \"" + addr[1] + "\""))
      << json.output;

  // Server 0 stopped (SIGSTOP): its kernel still accepts, nothing answers.
  // ps_ctl gives up after --timeout_ms instead of hanging.
  const pid_t s0 = (*cluster)->server(0).pid();
  ASSERT_EQ(kill(s0, SIGSTOP), 0);
  text = Ctl({"status", servers, "--timeout_ms=700"});
  kill(s0, SIGCONT);
  EXPECT_EQ(text.code, 3) << text.output;
  EXPECT_LT(text.seconds, 10 * SlowdownFactor()) << text.output;
  EXPECT_TRUE(Has(text.output, "2 lost")) << text.output;

  auto stopped = (*cluster)->server(0).Stop(10000 * SlowdownFactor());
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(*stopped, 0) << (*cluster)->server(0).ReadLog();
}

TEST_F(PsCtlTest, UsageErrorsExit2) {
  EXPECT_EQ(Ctl({"status"}).code, 2);                 // no servers
  EXPECT_EQ(Ctl({"--servers=127.0.0.1:1"}).code, 2);  // no command
  EXPECT_EQ(Ctl({"status", "--servers=nohostport"}).code, 2);
  EXPECT_EQ(Ctl({"status", "--servers=127.0.0.1:1", "--timeout_ms=0"}).code, 2);
  EXPECT_EQ(Ctl({"status", "--no_such_flag"}).code, 2);
  // A --run_dir without a cluster.env: failed, not usage.
  EXPECT_EQ(Ctl({"status", "--run_dir=" + Path("none")}).code, 1);
}

// --help: the usage line and the program's own flags, before anything of
// glog (whose flags are behind --helpfull); --version: version and build.
TEST_F(PsCtlTest, HelpListsOwnFlagsFirstAndVersionTellsTheBuild) {
  Outcome help = RunProgram({PS_SERVER_BIN, "--help"}, Path("help.log"));
  EXPECT_EQ(help.code, 0) << help.output;
  const std::string& h = help.output;
  EXPECT_EQ(h.rfind("ps_server: serves one shard", 0), 0) << h;
  const size_t own = h.find("Flags of ps_server:");
  const size_t shard_id = h.find("--shard_id (uint32");
  const size_t helpfull = h.find("--helpfull");
  ASSERT_NE(own, std::string::npos) << h;
  ASSERT_NE(shard_id, std::string::npos) << h;
  ASSERT_NE(helpfull, std::string::npos) << h;
  EXPECT_LT(own, shard_id);
  EXPECT_LT(shard_id, helpfull);
  // glog's flags are not described, only named after --helpfull.
  EXPECT_FALSE(Has(h, "--logtostderr (")) << h;
  EXPECT_FALSE(Has(h, "--minloglevel")) << h;
  EXPECT_GT(h.find("--logtostderr"), helpfull) << h;

  Outcome full = RunProgram({PS_SERVER_BIN, "--helpfull"}, Path("full.log"));
  EXPECT_EQ(full.code, 0);
  EXPECT_TRUE(Has(full.output, "-minloglevel")) << full.output;

  for (const char* bin : {PS_SERVER_BIN, PS_CTL_BIN}) {
    Outcome v = RunProgram({bin, "--version"}, Path("version.log"));
    EXPECT_EQ(v.code, 0) << v.output;
    const std::string name =
        std::string(bin).substr(std::string(bin).rfind('/') + 1);
    EXPECT_EQ(v.output.rfind(name + " " PS_VERSION "\n", 0), 0) << v.output;
    for (const char* part :
         {"build: ", "transports: shm tcp", "CUDA kernels: ", "sanitizers: "}) {
      EXPECT_TRUE(Has(v.output, part)) << part << " in " << v.output;
    }
  }
}

}  // namespace
}  // namespace ps::testing
