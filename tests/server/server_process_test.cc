// The ps_server binary as a process: it writes its port file, answers a
// hello with ClusterInfo, takes pushes one-sidedly into an inbox (and
// rejects garbage there, counting it), serves exact-key pushes and pulls,
// lets same-host workers pull a device server's rows over CUDA IPC (where
// a CUDA device is usable, else that test skips saying why), and stops with
// exit code 0 on a Shutdown request or SIGTERM; bad flags and configs give exit
// code 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/shm/remote_mapping.h"
#include "protocol/control_channel.h"
#include "protocol/inbox_ring.h"
#include "protocol/sparse_packet.h"
#include "protocol/status_words.h"
#include "table/device_param_table.h"

#ifndef PS_SERVER_BIN
#error "PS_SERVER_BIN must name the ps_server binary"
#endif

namespace ps {
namespace {

xfer::ContextOptions Named(const char* name) {
  xfer::ContextOptions o;
  o.name = name;
  return o;
}

using Clock = std::chrono::steady_clock;

constexpr const char* kTables = R"(
table { id: 1 name: "w" kind: HASHED dim: 1 capacity: 1000
        optimizer { name: "sgd" learning_rate: 1 } }
table { id: 2 name: "ids" kind: EXACT dim: 2 capacity: 100
        admit_after_pushes: 2 optimizer { name: "sum" } }
)";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ps_server_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A ps_server child: killed and reaped on destruction whatever happened.
// `env` ("NAME=value") is added to the environment it inherits.
class ServerProcess {
 public:
  ServerProcess(const TempDir& dir, std::vector<std::string> args,
                std::vector<std::string> env = {})
      : log_(dir.path() + "/server.log") {
    std::vector<std::string> argv{PS_SERVER_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      freopen(log_.c_str(), "w", stderr);
      std::vector<char*> c;
      for (auto& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      execve(c[0], c.data(), envp.data());
      _exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  std::string log() const { return ReadFile(log_); }

  // The exit code, or -1 if it did not exit within `timeout` (or died by a
  // signal).
  int WaitExit(std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }
  bool Exited() {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return true;
    }
    return false;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Starts a server with a port file and waits for the file.
struct Started {
  std::unique_ptr<ServerProcess> process;
  std::string address;
};

Started StartServer(const TempDir& dir, std::vector<std::string> extra = {},
                    std::vector<std::string> env = {}) {
  const std::string tables = dir.path() + "/test.tables";
  std::ofstream(tables) << kTables;
  const std::string port_file = dir.path() + "/port";
  std::vector<std::string> args{"--tables=" + tables, "--port=0",
                                "--port_file=" + port_file, "--num_workers=2"};
  args.insert(args.end(), extra.begin(), extra.end());
  Started s;
  s.process = std::make_unique<ServerProcess>(dir, args, std::move(env));
  const auto end = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < end && !s.process->Exited()) {
    std::string text = ReadFile(port_file);
    if (!text.empty() && text.back() == '\n') {
      s.address = text.substr(0, text.size() - 1);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(s.address.empty()) << s.process->log();
  return s;
}

proto::ControlRequest Hello(uint32_t worker, uint32_t workers) {
  proto::ControlRequest r;
  r.mutable_hello()->set_worker_id(worker);
  r.mutable_hello()->set_num_workers(workers);
  r.mutable_hello()->set_name("worker-" + std::to_string(worker));
  return r;
}

// Worker 0's packet number `n` (from 1) written into its inbox on the server
// of `info` as a worker writes one: length word, bytes, then the sequence
// word with the notify.
Status PutPacket(xfer::Endpoint& ep, const xfer::RemoteRegion& inbox,
                 const proto::ClusterInfo& info, uint64_t n,
                 const std::vector<uint8_t>& packet) {
  std::vector<uint8_t> src(8 + packet.size());
  const uint32_t length = static_cast<uint32_t>(packet.size());
  std::memcpy(src.data(), &length, 4);
  std::memcpy(src.data() + 8, packet.data(), packet.size());
  const uint64_t slot =
      protocol::SlotOffset(n, info.inbox_slots(), info.slot_bytes());
  return ep.PutWithNotify(src.data(), src.size(), inbox, slot + 8, inbox, slot,
                          n);
}

// Worker 0's inbox head on the server once it reaches `want` (or after 10
// s, whatever it is then).
uint64_t AwaitInboxHead(xfer::Endpoint& ep, const xfer::RemoteRegion& status,
                        uint64_t want) {
  protocol::StatusWords words{2};
  uint64_t head = 0;
  const auto end = Clock::now() + std::chrono::seconds(10);
  while (head < want && Clock::now() < end) {
    EXPECT_TRUE(ep.Get(&head, 8, status, words.InboxHeadOffset(0)).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return head;
}

// A packet of table 1 (dim 1) adding 2 to row 4 and 3 to row 9.
std::vector<uint8_t> TwoRowPacket() {
  protocol::SparsePacketMeta meta;
  meta.table_id = 1;
  meta.row_dim = 1;
  std::vector<uint8_t> packet;
  std::vector<protocol::EncodedPacket> packets;
  EXPECT_TRUE(protocol::EncodeSparsePackets(meta, std::vector<uint32_t>{4, 9},
                                            std::vector<float>{2.0f, 3.0f},
                                            1 << 16, &packet, &packets)
                  .ok());
  return packet;
}

TEST(ServerProcessTest, HelloGivesClusterInfoAndShutdownExitsZero) {
  TempDir dir;
  Started s = StartServer(dir);
  ASSERT_FALSE(s.address.empty());
  auto client = protocol::ControlClient::Connect(
      s.address, {.timeout_ms = 5000, .secret = {}});
  ASSERT_TRUE(client.ok()) << client.status();

  // A worker id this server does not serve is refused, the connection lives.
  EXPECT_FALSE(client->Call(Hello(5, 2)).ok());
  EXPECT_FALSE(client->Call(Hello(0, 3)).ok());

  auto reply = client->Call(Hello(1, 2));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const proto::ClusterInfo& info = reply->cluster();
  EXPECT_EQ(info.shard_id(), 0u);
  EXPECT_EQ(info.num_shards(), 1u);
  EXPECT_FALSE(info.xfer_address().empty());
  ASSERT_EQ(info.tables_size(), 2);
  EXPECT_EQ(info.tables(0).name(), "w");
  ASSERT_EQ(info.shard_tables_size(), 1);  // the EXACT table has no rows region
  EXPECT_EQ(info.shard_tables(0).table_id(), 1u);
  EXPECT_EQ(info.shard_tables(0).first_row(), 0u);
  EXPECT_EQ(info.shard_tables(0).rows(), 1000u);
  EXPECT_FALSE(info.shard_tables(0).rows_region().empty());
  EXPECT_FALSE(info.inbox_region().empty());
  EXPECT_FALSE(info.status_region().empty());
  EXPECT_EQ(info.inbox_slots(), protocol::kDefaultInboxSlots);
  EXPECT_EQ(info.slot_bytes(), protocol::kDefaultSlotBytes);
  EXPECT_EQ(info.consistency(), "async");

  proto::ControlRequest stats;
  stats.set_stats(true);
  auto st = client->Call(stats);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->stats().packets_applied(), 0u);

  proto::ControlRequest shutdown;
  shutdown.set_shutdown(true);
  EXPECT_TRUE(client->Call(shutdown).ok());
  EXPECT_EQ(s.process->WaitExit(std::chrono::seconds(5)), 0)
      << s.process->log();
  const std::string log = s.process->log();
  EXPECT_NE(log.find("table w (id 1, hashed, dim 1): rows [0, 1000) of 1000"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("worker-1 (worker-1) joined"), std::string::npos) << log;
  EXPECT_NE(log.find("final stats"), std::string::npos) << log;
}

TEST(ServerProcessTest, OneSidedPushAppliesAndGarbageIsCounted) {
  TempDir dir;
  Started s = StartServer(dir);
  ASSERT_FALSE(s.address.empty());
  auto client = protocol::ControlClient::Connect(
      s.address, {.timeout_ms = 5000, .secret = {}});
  ASSERT_TRUE(client.ok()) << client.status();
  auto reply = client->Call(Hello(0, 2));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const proto::ClusterInfo& info = reply->cluster();

  auto ctx = xfer::Context::Create(Named("worker-0")).value();
  auto ep = ctx->Connect(info.xfer_address());
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto inbox = (*ep)->Import(info.inbox_region()).value();
  auto status = (*ep)->Import(info.status_region()).value();
  auto rows = (*ep)->Import(info.shard_tables(0).rows_region()).value();

  std::vector<uint8_t> garbage(500, 0xab);
  ASSERT_TRUE(PutPacket(**ep, inbox, info, 1, garbage).ok());
  ASSERT_TRUE(PutPacket(**ep, inbox, info, 2, TwoRowPacket()).ok());

  ASSERT_EQ(AwaitInboxHead(**ep, status, 2), 2u) << s.process->log();
  float got[10];
  ASSERT_TRUE((*ep)->Get(got, sizeof(got), rows, 0).ok());
  EXPECT_EQ(got[4], -2.0f);
  EXPECT_EQ(got[9], -3.0f);
  EXPECT_EQ(got[5], 0.0f);

  proto::ControlRequest stats;
  stats.set_stats(true);
  auto st = client->Call(stats).value();
  EXPECT_EQ(st.stats().packets_applied(), 1u);
  EXPECT_EQ(st.stats().packets_rejected(), 1u);
  EXPECT_EQ(st.stats().rejected_by_sender().at("worker-0"), 1u);

  // Exact-key table over the control channel: admitted at the 2nd push.
  proto::ControlRequest push;
  push.mutable_exact_push()->set_table_id(2);
  push.mutable_exact_push()->set_step(1);
  push.mutable_exact_push()->add_keys(77);
  push.mutable_exact_push()->add_values(1.0f);
  push.mutable_exact_push()->add_values(2.0f);
  ASSERT_TRUE(client->Call(push).ok());
  proto::ControlRequest pull;
  pull.mutable_exact_pull()->set_table_id(2);
  pull.mutable_exact_pull()->add_keys(77);
  auto p = client->Call(pull).value();
  ASSERT_EQ(p.exact_pull().present_size(), 1);
  EXPECT_FALSE(p.exact_pull().present(0));
  ASSERT_TRUE(client->Call(push).ok());
  p = client->Call(pull).value();
  EXPECT_TRUE(p.exact_pull().present(0));
  ASSERT_EQ(p.exact_pull().values_size(), 2);
  EXPECT_EQ(p.exact_pull().values(1), 2.0f);
  // Exact requests for a non-EXACT table, or an unknown one, are errors.
  push.mutable_exact_push()->set_table_id(1);
  EXPECT_FALSE(client->Call(push).ok());
  pull.mutable_exact_pull()->set_table_id(99);
  EXPECT_FALSE(client->Call(pull).ok());

  // SIGTERM: drains and exits 0 quickly.
  const auto t0 = Clock::now();
  kill(s.process->pid(), SIGTERM);
  EXPECT_EQ(s.process->WaitExit(std::chrono::seconds(5)), 0)
      << s.process->log();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  const std::string log = s.process->log();
  EXPECT_NE(log.find("rejected packet 1 from worker-0"), std::string::npos)
      << log;
}

TEST(ServerProcessTest, BadFlagsAndConfigsExitWithTwo) {
  TempDir dir;
  const std::string bad_tables = dir.path() + "/bad.tables";
  std::ofstream(bad_tables) << "table { id: 1 name: \"t\" dim: 0 capacity: 5 }";
  const std::string good_tables = dir.path() + "/good.tables";
  std::ofstream(good_tables) << kTables;
  const std::vector<std::vector<std::string>> cases = {
      {},  // no --tables
      {"--tables=" + dir.path() + "/missing.tables"},
      {"--tables=" + bad_tables},
      {"--tables=" + good_tables, "--no_such_flag=1"},
      {"--tables=" + good_tables, "--num_workers=many"},
      {"--tables=" + good_tables, "--shard_id=2", "--num_shards=2"},
      {"--tables=" + good_tables, "--consistency=eventual"},
      {"--tables=" + good_tables, "--port=70000"},
      {"--tables=" + good_tables, "--slot_bytes=100"},
      {"--tables=" + good_tables, "--transport=carrier-pigeon"},
      {"--tables=" + good_tables, "--device=tpu:0"},
      {"--tables=" + good_tables, "--device=cuda:x"},
      {"--tables=" + good_tables, "--cpu_wakeup_latency_us=-3"},
  };
  for (const auto& args : cases) {
    ServerProcess p(dir, args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(p.WaitExit(std::chrono::seconds(10)), 2) << joined << "\n"
                                                       << p.log();
  }
}

// Tables on a GPU that this machine (or build) does not have: the server
// says why and exits, rather than serving from host memory.
TEST(ServerProcessTest, UnusableDeviceIsRefused) {
  if (table::DeviceParamTable::Available().ok()) {
    GTEST_SKIP() << "a CUDA device is usable here";
  }
  TempDir dir;
  const std::string tables = dir.path() + "/good.tables";
  std::ofstream(tables) << kTables;
  ServerProcess p(dir, {"--tables=" + tables, "--device=cuda:0"});
  const int code = p.WaitExit(std::chrono::seconds(10));
  EXPECT_NE(code, 0) << p.log();
  EXPECT_NE(code, -1) << "still running: " << p.log();
  EXPECT_NE(p.log().find("cannot start"), std::string::npos) << p.log();
  EXPECT_NE(p.log().find("CUDA"), std::string::npos) << p.log();
}

// A same-host worker pulls a device server's rows over CUDA IPC: the rows
// are the context's device memory (server/shard.h), which the core exports,
// so the worker's Get is a device copy of its own, not staged by the
// server's CPU. A push applied on the device is seen by the next pull.
TEST(ServerProcessTest, SameHostPullsFromADeviceServerGoOverCudaIpc) {
  if (Status s = table::DeviceParamTable::Available(); !s.ok()) {
    GTEST_SKIP() << "no usable CUDA device: " << s;
  }
  TempDir dir;
  Started s = StartServer(dir, {"--device=cuda:0"});
  ASSERT_FALSE(s.address.empty());
  auto client = protocol::ControlClient::Connect(
      s.address, {.timeout_ms = 5000, .secret = {}});
  ASSERT_TRUE(client.ok()) << client.status();
  auto reply = client->Call(Hello(0, 2));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const proto::ClusterInfo& info = reply->cluster();

  xfer::ContextOptions options = Named("worker-0");
  options.transport = xfer::TransportChoice::kShm;
  auto ctx = xfer::Context::Create(options).value();
  auto ep = ctx->Connect(info.xfer_address());
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto inbox = (*ep)->Import(info.inbox_region()).value();
  auto status = (*ep)->Import(info.status_region()).value();
  auto rows = (*ep)->Import(info.shard_tables(0).rows_region()).value();

  float got[10];
  ASSERT_TRUE((*ep)->Get(got, sizeof(got), rows, 0).ok());
  for (float v : got) EXPECT_EQ(v, 0.0f);  // table w starts at zero
  const xfer::internal::RemoteMapping* m = xfer::internal::MappingOf(rows);
  EXPECT_TRUE(m->ready.load() && m->device_export.has_value() &&
              !m->device_refused.load())
      << "the pull was staged by the server, not copied over CUDA IPC: "
      << s.process->log();

  ASSERT_TRUE(PutPacket(**ep, inbox, info, 1, TwoRowPacket()).ok());
  ASSERT_EQ(AwaitInboxHead(**ep, status, 1), 1u) << s.process->log();
  ASSERT_TRUE((*ep)->Get(got, sizeof(got), rows, 0).ok());
  EXPECT_EQ(got[4], -2.0f);
  EXPECT_EQ(got[9], -3.0f);
  EXPECT_EQ(got[5], 0.0f);
  EXPECT_FALSE(m->device_refused.load()) << s.process->log();

  kill(s.process->pid(), SIGTERM);
  EXPECT_EQ(s.process->WaitExit(std::chrono::seconds(10)), 0)
      << s.process->log();
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// With a cluster secret: a member gets its cluster info; a stranger (no
// secret, or another one) gets nothing on either port, and the server logs
// each refusal with the peer's address.
TEST(ServerProcessTest, OnlyMembersOfTheClusterAreServed) {
  TempDir dir;
  const std::string key = dir.path() + "/cluster.key";
  std::ofstream(key) << "the-cluster-secret-0123456789\n";
  chmod(key.c_str(), 0600);
  Started s = StartServer(dir, {"--cluster_secret_file=" + key});
  ASSERT_FALSE(s.address.empty());
  const auto secret = xfer::ClusterSecret::FromFile(key).value();

  auto member = protocol::ControlClient::Connect(
      s.address, {.timeout_ms = 5000, .secret = secret});
  ASSERT_TRUE(member.ok()) << member.status();
  auto info = member->Call(Hello(0, 2));
  ASSERT_TRUE(info.ok()) << info.status();
  const std::string xfer_address = info->cluster().xfer_address();

  // Refused at the handshake: it learns that it needs the secret.
  auto stranger = protocol::ControlClient::Connect(
      s.address, {.timeout_ms = 5000, .secret = {}});
  ASSERT_FALSE(stranger.ok());
  EXPECT_TRUE(stranger.status().Is(StatusCode::kUnauthenticated))
      << stranger.status();

  xfer::ContextOptions o = Named("intruder");
  o.secret = xfer::ClusterSecret::FromBytes("another-secret-abcdefgh").value();
  auto intruder = xfer::Context::Create(o).value();
  auto ep = intruder->Connect(xfer_address);
  ASSERT_FALSE(ep.ok());
  EXPECT_TRUE(ep.status().Is(StatusCode::kUnauthenticated)) << ep.status();

  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string log = s.process->log();
  EXPECT_NE(log.find("control listener " + s.address +
                     ": refused the connection from 127.0.0.1:"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(": refused the connection from 127.0.0.1:"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("(claims to be \"intruder\")"), std::string::npos) << log;
  EXPECT_EQ(log.find("worker-1 (worker-1) joined"), std::string::npos) << log;
}

// A secret given as $PS_CLUSTER_SECRET is wiped from the server's
// /proc/PID/environ (anyone who may read that file would see it) while the
// server still authenticates its peers with it.
TEST(ServerProcessTest, ASecretFromTheEnvironmentLeavesNoTraceInProcEnviron) {
  TempDir dir;
  const std::string value = "secret-in-the-environment-0123456789";
  Started s = StartServer(dir, {}, {"PS_CLUSTER_SECRET=" + value});
  ASSERT_FALSE(s.address.empty());
  const std::string environ_path =
      "/proc/" + std::to_string(s.process->pid()) + "/environ";
  const std::string env = ReadFile(environ_path);
  ASSERT_NE(env.find("PS_CLUSTER_SECRET="), std::string::npos)
      << "cannot read " << environ_path;
  EXPECT_EQ(env.find(value), std::string::npos)
      << environ_path << " shows the secret";

  auto member = protocol::ControlClient::Connect(
      s.address, {.timeout_ms = 5000,
                  .secret = xfer::ClusterSecret::FromBytes(value).value()});
  ASSERT_TRUE(member.ok()) << member.status();
  auto info = member->Call(Hello(0, 2));
  EXPECT_TRUE(info.ok()) << info.status();
  // Refused at the handshake or at the first request.
  auto stranger = protocol::ControlClient::Connect(
      s.address, {.timeout_ms = 5000, .secret = {}});
  const Status refused =
      stranger.ok() ? stranger->Call(Hello(1, 2)).status() : stranger.status();
  EXPECT_TRUE(refused.Is(StatusCode::kUnauthenticated)) << refused;
}

}  // namespace
}  // namespace ps
