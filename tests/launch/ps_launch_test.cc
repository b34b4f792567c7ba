// ps_launch as a real process: a small cluster of real ps_servers and
// ps_workers runs to the end and leaves nothing behind; a signal, a failing
// worker and --detach/--stop stop everything; a bad flagfile is a usage
// error (exit 2) that says what is wrong; the cluster secret reaches every
// process without being in any process's environment.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launch/process.h"
#include "launch/text_file.h"
#include "protocol/control_channel.h"
#include "tests/ps/server_process.h"

#ifndef PS_LAUNCH_BIN
#error "PS_LAUNCH_BIN, PS_DATAGEN_BIN and PS_SOURCE_DIR are set by CMake"
#endif

namespace {

using ps::launch::Process;
using ps::launch::ProcessSpec;
using ps::launch::ReadWholeFile;
using ps::testing::ScratchDir;
using ps::testing::SlowdownFactor;

// Running and not a zombie (a detached server's reaper is init).
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  auto stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  size_t paren = stat->rfind(')');
  return paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

// Every "server-<i> (pid N)" / "worker-<j> (pid N)" ps_launch logged for
// the processes it started. (No std::regex: GCC 12 warns inside it in
// sanitizer builds.)
std::vector<pid_t> LoggedPids(const std::string& log) {
  std::vector<pid_t> pids;
  const std::string marker = " (pid ";
  for (size_t at = log.find(marker); at != std::string::npos;
       at = log.find(marker, at + 1)) {
    size_t line = log.rfind('\n', at);
    line = line == std::string::npos ? 0 : line + 1;
    const std::string who = log.substr(line, at - line);
    if (who.find("ps_launch: server-") != 0 &&
        who.find("ps_launch: worker-") != 0) {
      continue;
    }
    pids.push_back(static_cast<pid_t>(
        std::strtol(log.c_str() + at + marker.size(), nullptr, 10)));
  }
  return pids;
}

// `root` and every process below it, found through the parent pid in
// /proc/*/stat.
std::vector<pid_t> ProcessTree(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto stat = ReadWholeFile("/proc/" + name + "/stat");
    if (!stat) continue;  // gone meanwhile
    // "pid (comm) state ppid ...": comm may hold anything but ends at the
    // last ')'.
    const size_t paren = stat->rfind(')');
    if (paren == std::string::npos || paren + 4 >= stat->size()) continue;
    const pid_t ppid =
        static_cast<pid_t>(std::strtol(stat->c_str() + paren + 4, nullptr, 10));
    children[ppid].push_back(static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    for (pid_t child : children[tree[i]]) tree.push_back(child);
  }
  return tree;
}

// Whether `environ` (a /proc/PID/environ) sets `name`.
bool HasVariable(const std::string& environ, const std::string& name) {
  const std::string entry = name + "=";
  return environ.rfind(entry, 0) == 0 ||
         environ.find('\0' + entry) != std::string::npos;
}

// What a client without the secret gets from the server at `address`:
// kUnauthenticated at the handshake or at its first request when the
// server has a secret.
ps::Status StrangersHello(const std::string& address) {
  auto client = ps::protocol::ControlClient::Connect(
      address, {.timeout_ms = 5000, .secret = {}});
  if (!client.ok()) return client.status();
  ps::proto::ControlRequest hello;
  hello.mutable_hello()->set_worker_id(0);
  hello.mutable_hello()->set_num_workers(1);
  hello.mutable_hello()->set_name("stranger");
  return client->Call(hello).status();
}

class PsLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ScratchDir::Create("ps-launch");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    dir_ = std::move(dir).value();
    run_dir_ = dir_->path() + "/run";
  }

  // `env` as ProcessSpec::env.
  std::unique_ptr<Process> Launch(std::vector<std::string> flags,
                                  const std::string& log_name = "launch.log",
                                  std::vector<std::string> env = {}) {
    ProcessSpec spec;
    spec.argv = {PS_LAUNCH_BIN};
    for (auto& f : flags) spec.argv.push_back(std::move(f));
    spec.env = std::move(env);
    spec.log_path = dir_->path() + "/" + log_name;
    spec.name = "ps_launch";
    auto p = Process::Spawn(spec);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(p).value() : nullptr;
  }

  // Exit code of a ps_launch run to its end (-1 on a timeout).
  int Run(std::vector<std::string> flags, int timeout_s = 120) {
    auto p = Launch(std::move(flags));
    if (!p) return -1;
    auto code = p->WaitExit(timeout_s * 1000 * SlowdownFactor());
    return code ? *code : -1;
  }

  std::string LaunchLog() const {
    return ReadWholeFile(dir_->path() + "/launch.log").value_or("");
  }

  std::vector<std::string> ServersOnly() const {
    return {"--servers=2", "--workers=0", "--tables=configs/lr.tables",
            "--run_dir=" + run_dir_};
  }

  // Waits for cluster.env (the servers are ready).
  bool WaitReady(Process& launcher) {
    const int64_t deadline =
        ps::launch::MonotonicMillis() + 60000LL * SlowdownFactor();
    while (ps::launch::MonotonicMillis() < deadline) {
      if (access((run_dir_ + "/cluster.env").c_str(), R_OK) == 0) return true;
      if (launcher.Exited()) return false;
      usleep(20000);
    }
    return false;
  }

  // The first server's control address, from cluster.env.
  std::string FirstServer() const {
    std::string env = ReadWholeFile(run_dir_ + "/cluster.env").value_or("");
    const std::string key = "SERVERS=";
    if (env.rfind(key, 0) != 0) return "";
    return env.substr(key.size(), env.find_first_of(",\n") - key.size());
  }

  // Each server was signalled once: a second SIGTERM makes a ps_server give
  // up its final checkpoint's waits.
  void ExpectServersStoppedOnce(int servers) const {
    for (int i = 0; i < servers; ++i) {
      std::string log =
          ReadWholeFile(run_dir_ + "/server-" + std::to_string(i) + ".log")
              .value_or("");
      EXPECT_NE(log.find("stopping"), std::string::npos) << log;
      EXPECT_EQ(log.find("stop requested again"), std::string::npos) << log;
    }
  }

  // Runs ps_datagen with `args` (after --model=lr) to the end.
  void GenerateData(std::vector<std::string> args) {
    ProcessSpec gen;
    gen.argv = {PS_DATAGEN_BIN, "--model=lr"};
    gen.argv.insert(gen.argv.end(), args.begin(), args.end());
    gen.log_path = dir_->path() + "/datagen.log";
    gen.name = "ps_datagen";
    auto datagen = Process::Spawn(gen);
    ASSERT_TRUE(datagen.ok()) << datagen.status().ToString();
    ASSERT_EQ((*datagen)->WaitExit(120000 * SlowdownFactor()), 0)
        << ps::launch::FileTail(gen.log_path, 2000);
  }

  std::unique_ptr<ScratchDir> dir_;
  std::string run_dir_;
};

TEST_F(PsLaunchTest, SmallClusterTrainsAndLeavesNothingBehind) {
  const std::string train = dir_->path() + "/train.tsv";
  const std::string eval = dir_->path() + "/eval.tsv";
  ASSERT_NO_FATAL_FAILURE(
      GenerateData({"--rows=4000", "--eval_rows=1000", "--seed=3",
                    "--output=" + train, "--eval_output=" + eval}));

  int code = Run({"--servers=2", "--workers=2", "--consistency=bsp",
                  "--tables=configs/lr.tables", "--run_dir=" + run_dir_,
                  "--worker_args=--flagfile=" PS_SOURCE_DIR
                  "/configs/lr.flags --epochs=1 --progress_secs=0"
                  " --train_data=" +
                      train + " --eval_data=" + eval +
                      " --metrics_json=" + dir_->path() + "/m{i}.json"});
  const std::string log = LaunchLog();
  ASSERT_EQ(code, 0) << log;
  for (int j = 0; j < 2; ++j) {
    std::string wlog =
        ReadWholeFile(run_dir_ + "/worker-" + std::to_string(j) + ".log")
            .value_or("");
    // Every worker trains; worker 0 evaluates.
    EXPECT_NE(wlog.find(j == 0 ? "eval AUC" : "training done"),
              std::string::npos)
        << wlog;
    EXPECT_EQ(
        access((dir_->path() + "/m" + std::to_string(j) + ".json").c_str(),
               R_OK),
        0)
        << "{i} in --worker_args names each worker's file";
    EXPECT_NE(
        access((run_dir_ + "/worker-" + std::to_string(j) + ".pid").c_str(),
               F_OK),
        0);
  }
  auto env = ReadWholeFile(run_dir_ + "/cluster.env");
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->rfind("SERVERS=127.0.0.1:", 0), 0u) << *env;
  std::vector<pid_t> pids = LoggedPids(log);
  EXPECT_EQ(pids.size(), 4u) << log;
  for (pid_t pid : pids)
    EXPECT_FALSE(Alive(pid)) << "pid " << pid << "\n" << log;
  EXPECT_NE(log.find("every worker is done"), std::string::npos) << log;
  ExpectServersStoppedOnce(2);
}

TEST_F(PsLaunchTest, SigtermIsForwardedAndStopsEveryServer) {
  auto launcher = Launch(ServersOnly());
  ASSERT_TRUE(launcher);
  ASSERT_TRUE(WaitReady(*launcher)) << LaunchLog();
  usleep(100000);  // the pid log lines follow cluster.env
  std::vector<pid_t> pids = LoggedPids(LaunchLog());
  ASSERT_EQ(pids.size(), 2u) << LaunchLog();
  for (pid_t pid : pids) EXPECT_TRUE(Alive(pid));
  kill(launcher->pid(), SIGTERM);
  auto code = launcher->WaitExit(60000 * SlowdownFactor());
  ASSERT_TRUE(code.has_value()) << LaunchLog();
  EXPECT_EQ(*code, 128 + SIGTERM) << LaunchLog();
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
  // Each server exited 0 on the forwarded SIGTERM.
  EXPECT_NE(LaunchLog().find("server-1 exited with code 0"), std::string::npos)
      << LaunchLog();
  ExpectServersStoppedOnce(2);
}

TEST_F(PsLaunchTest, PrefixAndBindAddressPerServer) {
  std::vector<std::string> flags = ServersOnly();
  // env execs the command, as ip netns exec does: the pid is the server's.
  flags.push_back("--server_prefix=env PS_LAUNCH_PREFIX=ns{i}");
  flags.push_back("--server_listen_host=127.0.0.1,127.0.0.1");
  auto launcher = Launch(flags);
  ASSERT_TRUE(launcher);
  ASSERT_TRUE(WaitReady(*launcher)) << LaunchLog();
  std::vector<pid_t> pids = LoggedPids(LaunchLog());
  ASSERT_EQ(pids.size(), 2u) << LaunchLog();
  for (int i = 0; i < 2; ++i) {
    std::string env =
        ReadWholeFile("/proc/" + std::to_string(pids[i]) + "/environ")
            .value_or("");
    EXPECT_NE(
        env.find(std::string("PS_LAUNCH_PREFIX=ns") + char('0' + i) + '\0'),
        std::string::npos);
    std::string cmdline =
        ReadWholeFile("/proc/" + std::to_string(pids[i]) + "/cmdline")
            .value_or("");
    EXPECT_NE(cmdline.find("--listen_host=127.0.0.1"), std::string::npos);
  }
  kill(launcher->pid(), SIGINT);
  EXPECT_EQ(launcher->WaitExit(60000 * SlowdownFactor()), 128 + SIGINT)
      << LaunchLog();
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
  // A list of the wrong length is a usage error.
  flags = ServersOnly();
  flags[3] = "--run_dir=" + dir_->path() + "/run2";
  flags.push_back("--server_listen_host=127.0.0.1,127.0.0.1,127.0.0.1");
  EXPECT_EQ(Run(flags), 2);
  EXPECT_NE(LaunchLog().find("--server_listen_host has 3 entries"),
            std::string::npos)
      << LaunchLog();
}

TEST_F(PsLaunchTest, FailingWorkerEndsTheClusterWithItsExitCode) {
  const std::string worker = dir_->path() + "/fail.sh";
  { std::ofstream(worker) << "#!/bin/sh\nexit 3\n"; }
  ASSERT_EQ(chmod(worker.c_str(), 0755), 0);
  std::vector<std::string> flags = ServersOnly();
  flags[1] = "--workers=1";
  flags.push_back("--worker_bin=" + worker);
  EXPECT_EQ(Run(flags), 3) << LaunchLog();
  std::vector<pid_t> pids = LoggedPids(LaunchLog());
  EXPECT_EQ(pids.size(), 3u) << LaunchLog();
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
}

TEST_F(PsLaunchTest, DetachLeavesTheClusterForStop) {
  std::vector<std::string> flags = ServersOnly();
  flags.push_back("--detach");
  ASSERT_EQ(Run(flags), 0) << LaunchLog();
  std::string out = LaunchLog();
  EXPECT_NE(out.find(run_dir_ + "\n"), std::string::npos) << out;
  std::vector<pid_t> pids = LoggedPids(out);
  ASSERT_EQ(pids.size(), 2u) << out;
  for (pid_t pid : pids) EXPECT_TRUE(Alive(pid)) << pid;
  auto stopper = Launch({"--stop", "--run_dir=" + run_dir_}, "stop.log");
  ASSERT_TRUE(stopper);
  EXPECT_EQ(stopper->WaitExit(60000 * SlowdownFactor()), 0)
      << ReadWholeFile(dir_->path() + "/stop.log").value_or("");
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid)) << pid;
  EXPECT_NE(access((run_dir_ + "/server-0.pid").c_str(), F_OK), 0);
}

// A secret given to ps_launch as $PS_CLUSTER_SECRET reaches the server and
// the worker (through exec prefixes, as an inherited descriptor) while no
// /proc/PID/environ shows it: not ps_launch's, not any process's it
// started. The server has the secret (a stranger is refused) and the worker
// too (it trains to the end).
TEST_F(PsLaunchTest, TheSecretIsInNoProcessEnvironment) {
  const std::string train = dir_->path() + "/train.tsv";
  // Enough rows for the worker to train a few tenths of a second.
  const int rows = static_cast<int>(20000 * ps::testing::TestScale());
  ASSERT_NO_FATAL_FAILURE(
      GenerateData({"--rows=" + std::to_string(rows), "--eval_rows=0",
                    "--seed=5", "--output=" + train}));

  // 32 bytes, unlike anything else in an environment.
  std::string secret = "launch-secret-" + std::to_string(getpid()) + "-";
  secret.resize(32, 'x');
  auto launcher = Launch(
      {"--servers=1", "--workers=1", "--tables=configs/lr.tables",
       "--run_dir=" + run_dir_, "--server_prefix=env PS_LAUNCH_PREFIX=s{i}",
       "--worker_prefix=env PS_LAUNCH_PREFIX=w{i}",
       "--worker_args=--flagfile=" PS_SOURCE_DIR
       "/configs/lr.flags --epochs=3 --progress_secs=0"
       " --train_data=" +
           train},
      "launch.log", {"PS_CLUSTER_SECRET=" + secret, "PS_CLUSTER_SECRET_FILE"});
  ASSERT_TRUE(launcher);
  ASSERT_TRUE(WaitReady(*launcher)) << LaunchLog();
  const ps::Status stranger = StrangersHello(FirstServer());
  EXPECT_TRUE(stranger.Is(ps::StatusCode::kUnauthenticated))
      << stranger.ToString();

  const pid_t launcher_pid = launcher->pid();
  const std::string launcher_cmdline =
      ReadWholeFile("/proc/" + std::to_string(launcher_pid) + "/cmdline")
          .value_or("");
  std::set<pid_t> seen;
  std::map<pid_t, std::string> leaks;  // pid -> its command line
  bool handed_on = false;
  std::optional<int> code;
  const int64_t deadline =
      ps::launch::MonotonicMillis() + 120000LL * SlowdownFactor();
  while (!(code = launcher->Exited()) &&
         ps::launch::MonotonicMillis() < deadline) {
    for (pid_t pid : ProcessTree(launcher_pid)) {
      // The environment is judged by the image it belongs to, so the
      // command line is read before and after it: a process that exec'd
      // between the reads (a forked ps_launch becoming env, env becoming
      // ps_server), or is exiting (empty command line), is looked at again
      // on the next round. A leak lasts the process's life; it is still seen.
      const std::string proc = "/proc/" + std::to_string(pid);
      const auto cmdline = ReadWholeFile(proc + "/cmdline");
      const auto env = ReadWholeFile(proc + "/environ");
      if (!cmdline || cmdline->empty() || !env ||
          ReadWholeFile(proc + "/cmdline") != cmdline) {
        continue;
      }
      seen.insert(pid);
      // A child gets no PS_CLUSTER_SECRET at all (ps_launch's own is
      // there, wiped). A child forked and not yet exec'd is still ps_launch's
      // image, with ps_launch's (wiped) environment.
      const bool launcher_image =
          pid == launcher_pid || *cmdline == launcher_cmdline;
      if ((env->find(secret) != std::string::npos ||
           (!launcher_image && HasVariable(*env, "PS_CLUSTER_SECRET"))) &&
          !leaks.count(pid)) {
        leaks[pid] = *cmdline;
      }
      handed_on |= env->find("PS_CLUSTER_SECRET_FILE=/proc/self/fd/") !=
                   std::string::npos;
    }
    usleep(10000);
  }
  for (const auto& [pid, cmdline] : leaks) {
    ADD_FAILURE() << "/proc/" << pid
                  << "/environ holds the secret or PS_CLUSTER_SECRET: "
                  << cmdline;
  }
  ASSERT_TRUE(code.has_value()) << LaunchLog();
  EXPECT_EQ(*code, 0) << LaunchLog();
  EXPECT_TRUE(handed_on);
  // ps_launch, the server and the worker, each seen while it ran.
  std::vector<pid_t> started = LoggedPids(LaunchLog());
  ASSERT_EQ(started.size(), 2u) << LaunchLog();
  EXPECT_EQ(seen.count(launcher_pid), 1u);
  for (pid_t pid : started) EXPECT_EQ(seen.count(pid), 1u) << pid;
  EXPECT_GE(seen.size(), 3u);
}

// A key file is handed on by its absolute path; one that others may use
// stops ps_launch before anything starts (exit 2).
TEST_F(PsLaunchTest, AKeyFileIsHandedOnByItsPath) {
  auto key = dir_->WriteFile("cluster.key", "a-key-file-secret-0123456789abcd");
  ASSERT_TRUE(key.ok());
  ASSERT_EQ(chmod(key->c_str(), 0660), 0);
  std::vector<std::string> flags = ServersOnly();
  flags[0] = "--servers=1";
  flags.push_back("--cluster_secret_file=" + *key);
  EXPECT_EQ(Run(flags), 2) << LaunchLog();
  EXPECT_NE(LaunchLog().find("chmod 600"), std::string::npos) << LaunchLog();
  EXPECT_NE(access(run_dir_.c_str(), F_OK), 0) << "nothing was started";

  ASSERT_EQ(chmod(key->c_str(), 0600), 0);
  auto launcher = Launch(flags, "launch.log", {"PS_CLUSTER_SECRET"});
  ASSERT_TRUE(launcher);
  ASSERT_TRUE(WaitReady(*launcher)) << LaunchLog();
  usleep(100000);  // the pid log lines follow cluster.env
  std::vector<pid_t> pids = LoggedPids(LaunchLog());
  ASSERT_EQ(pids.size(), 1u) << LaunchLog();
  const std::string env =
      ReadWholeFile("/proc/" + std::to_string(pids[0]) + "/environ")
          .value_or("");
  EXPECT_NE(env.find("PS_CLUSTER_SECRET_FILE=" + *key + '\0'),
            std::string::npos);
  const ps::Status stranger = StrangersHello(FirstServer());
  EXPECT_TRUE(stranger.Is(ps::StatusCode::kUnauthenticated))
      << stranger.ToString();
  kill(launcher->pid(), SIGTERM);
  EXPECT_EQ(launcher->WaitExit(60000 * SlowdownFactor()), 128 + SIGTERM)
      << LaunchLog();
}

TEST_F(PsLaunchTest, BadFlagfileIsAUsageError) {
  auto file = dir_->WriteFile("bad.flags", "--servers=two\n--workers=0\n");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(Run({"--flagfile=" + *file, "--run_dir=" + run_dir_}), 2);
  std::string log = LaunchLog();
  EXPECT_NE(log.find("'two'"), std::string::npos) << log;
  EXPECT_NE(log.find("--servers"), std::string::npos) << log;
  EXPECT_NE(access(run_dir_.c_str(), F_OK), 0) << "nothing was started";

  EXPECT_EQ(Run({"--flagfile=" + dir_->path() + "/missing.flags"}), 2);
  log = LaunchLog();
  EXPECT_NE(log.find("cannot read " + dir_->path() + "/missing.flags"),
            std::string::npos)
      << log;
}

}  // namespace
