// The acceptance run, end to end with the real binaries: ps_datagen
// writes 1M training rows (+200k held out) from a planted LR and from a
// planted FM model; ps_worker trains with the shipped configs/ flags and
// tables, in-process (--local) and against ps_server processes on
// 127.0.0.1. Checked:
//   - LR on LR-planted and FM on FM-planted data: eval AUC within 0.01 of
//     the planted model's own AUC;
//   - LR on FM-planted data measurably (0.005) below FM (both printed);
//   - 1 server + 1 worker within 0.005 of --local, 2 + 2 within 0.01 (the
//     servers in bsp, as scripts/demo.sh runs them);
//   - DeepFM: finite logloss and AUC above LR's on FM-planted data.
// Heavy (minutes on 2 cores): ctest label "acceptance".
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::string kSource = PS_SOURCE_DIR;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The number after "key": in a flat JSON object; NaN if absent.
double JsonNumber(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

int RunCommand(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class AcceptanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/train_acceptance.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = new std::string(dir);
    for (std::string kind : {"lr", "fm"}) {
      std::string cmd = std::string(PS_DATAGEN_BIN) + " --model=" + kind +
                        " --rows=1000000 --eval_rows=200000 --seed=1" +
                        " --output=" + *dir_ + "/" + kind + "_train.tsv" +
                        " --eval_output=" + *dir_ + "/" + kind + "_eval.tsv" +
                        " --metrics_json=" + *dir_ + "/" + kind +
                        "_planted.json > /dev/null";
      ASSERT_EQ(RunCommand(cmd), 0) << cmd;
    }
  }
  static void TearDownTestSuite() {
    RunCommand("rm -rf " + *dir_);
    delete dir_;
  }

  static double Planted(const std::string& kind) {
    return JsonNumber(ReadFile(*dir_ + "/" + kind + "_planted.json"),
                      "planted_auc");
  }

  // Trains `model` on `data`-planted rows; returns the eval metrics JSON.
  // servers == 0: --local.
  static std::string Train(const std::string& model, const std::string& data,
                           int servers, int workers) {
    const std::string& d = *dir_;
    const std::string tables = kSource + "/configs/" + model + ".tables";
    const std::string tag = model + "_on_" + data + "_" +
                            std::to_string(servers) + "s" +
                            std::to_string(workers) + "w";
    std::string common = std::string(PS_WORKER_BIN) + " --flagfile=" + kSource +
                         "/configs/" + model + ".flags" + " --train_data=" + d +
                         "/" + data + "_train.tsv" + " --eval_data=" + d + "/" +
                         data + "_eval.tsv" + " --progress_secs=0";
    if (servers == 0) {
      std::string cmd = common + " --local --tables=" + tables +
                        " --metrics_json=" + d + "/" + tag + ".json > " + d +
                        "/" + tag + ".log 2>&1";
      EXPECT_EQ(RunCommand(cmd), 0) << cmd << "\n"
                                    << ReadFile(d + "/" + tag + ".log");
      return ReadFile(d + "/" + tag + ".json");
    }
    std::vector<pid_t> server_pids;
    std::string addresses;
    for (int s = 0; s < servers; ++s) {
      std::string port_file = d + "/" + tag + ".addr" + std::to_string(s);
      std::string log = d + "/" + tag + ".server" + std::to_string(s);
      pid_t pid = fork();
      if (pid == 0) {
        freopen(log.c_str(), "w", stderr);
        std::string a1 = "--shard_id=" + std::to_string(s),
                    a2 = "--num_shards=" + std::to_string(servers),
                    a3 = "--num_workers=" + std::to_string(workers),
                    a4 = "--port_file=" + port_file, a5 = "--tables=" + tables;
        // bsp: a worker's next step reads every push of the last one. Under
        // async the servers' apply lag, and with it how stale a worker's
        // reads are, depends on the machine's load: on 2 busy cores 2 + 2
        // async runs of this test ended anywhere from 0.756 to 0.771.
        execl(PS_SERVER_BIN, PS_SERVER_BIN, a1.c_str(), a2.c_str(), a3.c_str(),
              "--port=0", "--consistency=bsp", a4.c_str(), a5.c_str(), nullptr);
        _exit(127);
      }
      server_pids.push_back(pid);
      std::string address;
      for (int i = 0; i < 600 && address.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        address = ReadFile(port_file);
      }
      EXPECT_FALSE(address.empty()) << ReadFile(log);
      while (!address.empty() && address.back() == '\n') address.pop_back();
      addresses += (s ? "," : "") + address;
    }
    // Worker 0 evaluates; the others train their share.
    std::string cmds;
    for (int w = 0; w < workers; ++w) {
      cmds += common + " --servers=" + addresses +
              " --worker_id=" + std::to_string(w) +
              " --num_workers=" + std::to_string(workers) +
              " --metrics_json=" + d + "/" + tag + ".w" + std::to_string(w) +
              ".json > " + d + "/" + tag + ".w" + std::to_string(w) +
              ".log 2>&1 & ";
    }
    cmds +=
        "fail=0; for p in $(jobs -p); do wait $p || fail=1; done; "
        "exit $fail";
    EXPECT_EQ(RunCommand("bash -c '" + cmds + "'"), 0)
        << ReadFile(d + "/" + tag + ".w0.log");
    for (pid_t pid : server_pids) {
      kill(pid, SIGTERM);
      int status = 0;
      waitpid(pid, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return ReadFile(d + "/" + tag + ".w0.json");
  }

  static std::string* dir_;
  static std::map<std::string, double> auc_;
};

std::string* AcceptanceTest::dir_ = nullptr;
std::map<std::string, double> AcceptanceTest::auc_;

double Auc(const std::string& json) { return JsonNumber(json, "eval_auc"); }

TEST_F(AcceptanceTest, LrOnLrPlantedDataReachesTheOptimum) {
  const double planted = Planted("lr");
  const double auc = Auc(Train("lr", "lr", 0, 0));
  std::printf("LR on LR-planted data: eval AUC %.4f, planted optimum %.4f\n",
              auc, planted);
  EXPECT_NEAR(auc, planted, 0.01);
}

TEST_F(AcceptanceTest, FmReachesTheOptimumAndBeatsLrOnFmPlantedData) {
  const double planted = Planted("fm");
  const double fm = Auc(Train("fm", "fm", 0, 0));
  const double lr = Auc(Train("lr", "fm", 0, 0));
  auc_["fm_local"] = fm;
  auc_["lr_on_fm"] = lr;
  std::printf(
      "FM-planted data (optimum AUC %.4f): FM eval AUC %.4f, LR eval AUC "
      "%.4f\n",
      planted, fm, lr);
  EXPECT_NEAR(fm, planted, 0.01);
  EXPECT_LT(lr, fm - 0.005);
}

TEST_F(AcceptanceTest, DistributedMatchesLocal) {
  if (!auc_.count("fm_local")) auc_["fm_local"] = Auc(Train("fm", "fm", 0, 0));
  const double local = auc_["fm_local"];
  const double one = Auc(Train("fm", "fm", 1, 1));
  const double two = Auc(Train("fm", "fm", 2, 2));
  std::printf(
      "FM eval AUC: --local %.4f, 1 server + 1 worker %.4f, 2 servers + 2 "
      "workers %.4f\n",
      local, one, two);
  EXPECT_NEAR(one, local, 0.005);
  EXPECT_NEAR(two, local, 0.01);
}

TEST_F(AcceptanceTest, DeepFmTrainsAndBeatsLrOnFmPlantedData) {
  if (!auc_.count("lr_on_fm")) auc_["lr_on_fm"] = Auc(Train("lr", "fm", 0, 0));
  const std::string json = Train("deepfm", "fm", 0, 0);
  const double auc = Auc(json), logloss = JsonNumber(json, "eval_logloss");
  std::printf(
      "DeepFM on FM-planted data: eval AUC %.4f logloss %.4f (LR %.4f)\n", auc,
      logloss, auc_["lr_on_fm"]);
  EXPECT_TRUE(std::isfinite(logloss) && logloss < 0.69);
  EXPECT_GT(auc, auc_["lr_on_fm"]);
}

}  // namespace
