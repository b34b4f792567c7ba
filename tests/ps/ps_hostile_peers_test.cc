// What an outsider without the cluster secret can do to a real ps_server,
// and what it must not achieve (issue: denial of service before
// authentication). Hostile peers are raw sockets on loopback; the server is
// the real binary; honest workers are PsClients in this process.
//
// - Silent connections held on both ports, from the worker's own address
//   and from 16 other 127.0.0.x addresses and re-opened as the server drops
//   them, do not keep an authenticated worker out: it connects within 1 s
//   and its rows are exact. Nor do connections that got as far as the
//   challenge without the secret and stall there.
// - Control connections that announce 256 MiB bodies and keep streaming
//   are closed at once, and the server's memory does not grow.
// - Out of file descriptors, the server neither spins nor floods its log,
//   and serves again once the attackers leave.
// - A peer's claimed name cannot forge a log line; failed proofs cost one
//   log line per period, not one each.
// - 64 workers that start at once all connect.
// Each runs with and without a secret (loopback, no secret: the same holds
// before a connection's first valid message).
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/auth.h"
#include "core/descriptor.pb.h"
#include "net/connect.h"
#include "net/message_frame.h"
#include "net/transfer.h"
#include "protocol/control_channel.h"
#include "tests/fixed_time_zone.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kTables[] = R"(
table { id: 1 name: "sums" kind: HASHED dim: 2 capacity: 4096
        push_value_type: FP32 optimizer { name: "sum" } }
)";
constexpr char kSecretBytes[] = "the-hostile-peers-test-secret-0123456789";

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// /proc/PID/stat: user + system CPU seconds.
double CpuSeconds(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

double RssMb(pid_t pid) {
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      return kb / 1024;
    }
  }
  return 0;
}

int OpenDescriptors(pid_t pid) {
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n - 2;  // . and ..
}

size_t CountLines(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// A TCP connection to `address` from `source` (a 127.0.0.x), or -1.
net::UniqueFd ConnectFrom(const std::string& source,
                          const std::string& address) {
  auto hp = net::SplitHostPort(address).value();
  net::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(hp.second);
  inet_pton(AF_INET, hp.first.c_str(), &to.sin_addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    return net::UniqueFd();
  }
  return fd;
}

// True once the peer closed `fd` (EOF or reset); reads and drops what it
// sent before (a challenge); does not wait.
bool ClosedByPeer(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

// Connections to `targets`, spread over 127.0.0.1 (the workers' own
// address) and 127.0.0.2..17, each sending its target's `first` bytes (none:
// silent) and nothing more; a thread re-opens every one the server closes,
// as an attacker would, until the object dies.
class Crowd {
 public:
  struct Target {
    std::string address;
    std::string first;  // sent right after connecting
  };
  Crowd(std::vector<Target> targets, int per_target)
      : targets_(std::move(targets)) {
    for (size_t t = 0; t < targets_.size(); ++t) {
      for (int i = 0; i < per_target; ++i) {
        conns_.push_back({t, Source(conns_.size()), net::UniqueFd()});
      }
    }
    for (Conn& c : conns_) Open(c);
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        for (Conn& c : conns_) {
          if (!c.fd.valid() || ClosedByPeer(c.fd.get())) {
            Open(c);
            reopened_.fetch_add(1);
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~Crowd() {
    stop_.store(true);
    thread_.join();
  }
  size_t reopened() const { return reopened_.load(); }

 private:
  struct Conn {
    size_t target;
    std::string source;
    net::UniqueFd fd;
  };
  static std::string Source(size_t i) {
    return "127.0.0." + std::to_string(1 + i % 17);
  }
  void Open(Conn& c) {
    const Target& t = targets_[c.target];
    c.fd = ConnectFrom(c.source, t.address);
    if (c.fd.valid() && !t.first.empty()) {
      (void)send(c.fd.get(), t.first.data(), t.first.size(), MSG_NOSIGNAL);
    }
  }
  std::vector<Target> targets_;
  std::vector<Conn> conns_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> reopened_{0};
  std::thread thread_;
};

// `message` as one frame: a 4-byte little-endian length, then its bytes.
std::string Frame(const google::protobuf::MessageLite& message) {
  const std::string body = message.SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>(n >> (8 * i));
  return frame + body;
}

class HostilePeersTest : public ::testing::TestWithParam<bool> {
 protected:
  bool with_secret() const { return GetParam(); }

  void SetUp() override {
    ClusterOptions o;
    o.num_servers = 1;
    o.num_workers = 64;
    o.transport = xfer::TransportChoice::kTcp;
    o.apply_threads = 1;
    o.tables = kTables;
    dir_ = ScratchDir::Create("hostile").value();
    if (with_secret()) {
      const std::string key =
          dir_->WriteFile("cluster.key", kSecretBytes).value();
      ASSERT_EQ(chmod(key.c_str(), 0600), 0);
      o.extra_flags.push_back("--cluster_secret_file=" + key);
      secret_ = xfer::ClusterSecret::FromBytes(kSecretBytes).value();
    }
    auto cluster = TestCluster::Start(o, "hostile");
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    xfer_address_ = XferAddress();
    ASSERT_FALSE(xfer_address_.empty()) << server().ReadLog();
  }

  ServerProcess& server() { return cluster_->server(0); }
  pid_t pid() { return server().pid(); }
  const std::string& control_address() { return cluster_->addresses()[0]; }

  // The server's xfer listener, from its start-up line.
  std::string XferAddress() {
    const std::string log = server().ReadLog();
    const std::string marker = "listening on ";
    const size_t at = log.find(marker);
    if (at == std::string::npos) return "";
    const size_t start = at + marker.size();
    return log.substr(start, log.find(',', start) - start);
  }

  StatusOr<std::unique_ptr<worker::PsClient>> Worker(uint32_t id) {
    worker::PsClient::Options o;
    o.worker_id = id;
    o.num_workers = cluster_->options().num_workers;
    o.servers = cluster_->addresses();
    o.xfer.transport = xfer::TransportChoice::kTcp;
    o.xfer.peer_timeout_ms = 10000 * SlowdownFactor();
    o.xfer.secret = secret_;
    return worker::PsClient::Connect(o);
  }

  // Pushes integer gradients for `keys` `rounds` times and checks the rows
  // read back: exact sums.
  void ExpectExactRows(worker::PsClient& client, int rounds) {
    std::vector<uint64_t> keys;
    for (uint64_t k = 1; k <= 64; ++k) keys.push_back(k * 7919);
    std::vector<float> grads(keys.size() * 2);
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = static_cast<float>(i % 5) - 2;
    }
    for (int r = 0; r < rounds; ++r) {
      ASSERT_TRUE(client.Push(1, keys, grads).ok());
    }
    ASSERT_TRUE(client.WaitApplied().ok());
    std::vector<float> rows(keys.size() * 2);
    ASSERT_TRUE(client.Pull(1, keys, rows).ok());
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(rows[i], grads[i] * static_cast<float>(rounds)) << "at " << i;
    }
  }

  // A crowd of 160 connections per port (more than the 128 handshakes
  // each holds, so it churns) on `targets`; a worker then connects within
  // 1 s and its rows are exact.
  void ExpectAWorkerGetsPast(std::vector<Crowd::Target> targets,
                             const char* what) {
    Crowd crowd(std::move(targets), 160);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto start = Clock::now();
    auto client = Worker(0);
    const double took = SecondsSince(start);
    ASSERT_TRUE(client.ok()) << client.status();
    std::printf(
        "connected past 2 x 160 %s in %.3f s (the attacker "
        "re-opened %zu)\n",
        what, took, crowd.reopened());
    EXPECT_LT(took, 1.0 * SlowdownFactor());
    ExpectExactRows(**client, 3);
  }

  std::unique_ptr<ScratchDir> dir_;
  std::unique_ptr<TestCluster> cluster_;
  xfer::ClusterSecret secret_;
  std::string xfer_address_;
};

TEST_P(HostilePeersTest, SilentConnectionsDoNotKeepAWorkerOut) {
  // More than the 128 handshakes each port holds: the crowd churns.
  ExpectAWorkerGetsPast({{control_address(), ""}, {xfer_address_, ""}},
                        "silent connections");
}

// Outsiders that get as far as they can without the secret (their first
// message answered with a challenge) and stall there, renewed as they are
// dropped: a worker's handshake, a round trip or two, still completes.
TEST_P(HostilePeersTest, ACrowdStalledAtTheProofDoesNotKeepAWorkerOut) {
  if (!with_secret()) {
    GTEST_SKIP() << "without a secret the first message completes the "
                    "handshake: there is nothing to stall at";
  }
  proto::ControlRequest auth;
  auth.mutable_auth()->set_nonce(xfer::NewNonce());
  xfer::proto::Hello hello;
  hello.set_name("crowd");
  hello.set_instance(7);
  hello.set_auth_nonce(xfer::NewNonce());
  ExpectAWorkerGetsPast(
      {{control_address(), Frame(auth)}, {xfer_address_, Frame(hello)}},
      "connections stalled at the proof");
}

TEST_P(HostilePeersTest, BodiesAnnouncedBeforeTheHandshakeCostNothing) {
  const double rss_before = RssMb(pid());
  struct Flood {
    net::UniqueFd fd;
    size_t sent = 0;
    double closed_after = -1;
  };
  std::vector<Flood> floods(10);
  const auto start = Clock::now();
  for (size_t i = 0; i < floods.size(); ++i) {
    Flood& f = floods[i];
    f.fd = net::ConnectTcp(control_address(), 2000).value();
    // Half open with a valid AUTH first (a nonce, answered), then announce
    // 256 MiB; the others announce it at once.
    if (i % 2 == 1) {
      proto::ControlRequest auth;
      auth.mutable_auth()->set_nonce(xfer::NewNonce());
      ASSERT_TRUE(
          protocol::SendControlMessage(f.fd.get(), auth, net::DeadlineIn(1000))
              .ok());
      proto::ControlReply challenge;
      ASSERT_TRUE(protocol::RecvControlMessage(f.fd.get(), &challenge,
                                               net::DeadlineIn(2000), 2000)
                      .ok());
      if (!with_secret()) {
        // Without a secret that AUTH completed the handshake: the
        // connection is established, as a worker's would be, and what it
        // sends now is a request (bounded by the request limits).
        f.closed_after = 0;
        continue;
      }
    }
    const uint32_t length = protocol::kMaxControlMessageBytes;
    ASSERT_EQ(send(f.fd.get(), &length, sizeof(length), MSG_NOSIGNAL), 4);
  }
  // Stream body bytes for up to 2 s (the server must not wait that long).
  std::vector<char> chunk(64 << 10, 'x');
  while (SecondsSince(start) < 2.0) {
    bool any = false;
    for (Flood& f : floods) {
      if (f.closed_after >= 0) continue;
      any = true;
      const ssize_t n = send(f.fd.get(), chunk.data(), chunk.size(),
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) f.sent += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
          ClosedByPeer(f.fd.get())) {
        f.closed_after = SecondsSince(start);
      }
    }
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double grown = RssMb(pid()) - rss_before;
  for (size_t i = 0; i < floods.size(); ++i) {
    if (!with_secret() && i % 2 == 1) continue;
    EXPECT_GE(floods[i].closed_after, 0)
        << "connection " << i << " still open after 2 s, having sent "
        << floods[i].sent << " bytes";
    std::printf(
        "flood %zu: closed after %.3f s, %zu bytes sent into socket "
        "buffers\n",
        i, floods[i].closed_after, floods[i].sent);
  }
  std::printf("server RSS grew by %.1f MB\n", grown);
  EXPECT_LT(grown, 20.0);
  // The server serves on.
  auto client = Worker(0);
  ASSERT_TRUE(client.ok()) << client.status();
  ExpectExactRows(**client, 1);
}

TEST_P(HostilePeersTest, OutOfDescriptorsTheServerNeitherSpinsNorFloodsItsLog) {
  // Room for 24 more descriptors (the soft limit, which the server's own
  // user could lower and raise back): the attack below exhausts them.
  const int open = OpenDescriptors(pid());
  ASSERT_GT(open, 0);
  rlimit old{};
  ASSERT_EQ(prlimit(pid(), RLIMIT_NOFILE, nullptr, &old), 0)
      << std::strerror(errno);
  const rlimit limit{static_cast<rlim_t>(open + 24), old.rlim_max};
  ASSERT_EQ(prlimit(pid(), RLIMIT_NOFILE, &limit, nullptr), 0)
      << std::strerror(errno);
  const double idle_start = CpuSeconds(pid());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double idle_cpu = (CpuSeconds(pid()) - idle_start) / 0.5;
  const size_t lines_before = CountLines(server().ReadLog(), "\n");
  double cpu = 0, seconds = 0;
  size_t lines = 0;
  {
    Crowd crowd({{control_address(), ""}, {xfer_address_, ""}}, 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double cpu_start = CpuSeconds(pid());
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    seconds = SecondsSince(start);
    cpu = (CpuSeconds(pid()) - cpu_start) / seconds;
    lines = CountLines(server().ReadLog(), "\n") - lines_before;
  }
  const std::string log = server().ReadLog();
  std::printf(
      "out of descriptors: %.3f CPU-s/s (idle %.3f), %zu log lines "
      "in %.1f s\n",
      cpu, idle_cpu, lines, seconds + 0.3);
  EXPECT_NE(log.find("out of file descriptors"), std::string::npos) << log;
  // Before: two threads at full speed, 2 million lines in 10 s.
  EXPECT_LT(cpu - idle_cpu, 0.5) << "the server spins";
  EXPECT_LT(lines, 20u) << FileTail(server().log_path(), 4000);
  // Once the attackers are gone, a worker gets in.
  ASSERT_EQ(prlimit(pid(), RLIMIT_NOFILE, &old, nullptr), 0);
  auto client = Worker(0);
  ASSERT_TRUE(client.ok()) << client.status();
  ExpectExactRows(**client, 1);
}

TEST_P(HostilePeersTest, ANameCannotForgeALogLine) {
  const std::string forged =
      "E1203 00:00:00.000000 1 checkpointer.cc:1] checkpoint deleted";
  net::UniqueFd fd = net::ConnectTcp(xfer_address_, 2000).value();
  xfer::proto::Hello hello;
  hello.set_name("intruder\n" + forged + "\n\x1b[2J");
  hello.set_instance(1);
  hello.set_auth_nonce(xfer::NewNonce());
  ASSERT_TRUE(net::SendMessage(fd.get(), hello, net::DeadlineIn(1000)).ok());
  // With a secret: challenged, then we hang up without a proof. Without
  // one: the hello is answered and we hang up.
  auto answered = net::WaitReadable(fd.get(), net::DeadlineIn(5000));
  ASSERT_TRUE(answered.ok() && *answered) << "no answer to the hello";
  fd.Reset();
  const auto start = Clock::now();
  std::string log;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = server().ReadLog();
  } while (with_secret() && log.find("intruder") == std::string::npos &&
           SecondsSince(start) < 5.0 * SlowdownFactor());
  if (with_secret()) {
    // Escaped (and cut after 64 bytes).
    EXPECT_NE(log.find("(claims to be \"intruder\\nE1203 00:00:00"),
              std::string::npos)
        << log;
  }
  EXPECT_EQ(log.find("\n" + forged), std::string::npos) << log;
  EXPECT_EQ(log.find("\x1b"), std::string::npos);
}

TEST_P(HostilePeersTest, FailedProofsAreLoggedAtARate) {
  if (!with_secret()) GTEST_SKIP() << "nothing to prove without a secret";
  constexpr int kAttempts = 200;
  for (int i = 0; i < kAttempts; ++i) {
    net::UniqueFd fd = net::ConnectTcp(control_address(), 2000).value();
    proto::ControlRequest auth;
    auth.mutable_auth()->set_nonce(xfer::NewNonce());
    ASSERT_TRUE(
        protocol::SendControlMessage(fd.get(), auth, net::DeadlineIn(1000))
            .ok());
    proto::ControlReply challenge;
    ASSERT_TRUE(protocol::RecvControlMessage(fd.get(), &challenge,
                                             net::DeadlineIn(2000), 2000)
                    .ok());
    proto::ControlRequest proof;
    proof.mutable_auth()->set_proof(std::string(xfer::kProofBytes, 'p'));
    ASSERT_TRUE(
        protocol::SendControlMessage(fd.get(), proof, net::DeadlineIn(1000))
            .ok());
    proto::ControlReply refused;
    ASSERT_TRUE(protocol::RecvControlMessage(fd.get(), &refused,
                                             net::DeadlineIn(2000), 2000)
                    .ok());
    ASSERT_EQ(refused.error_code(),
              static_cast<uint32_t>(StatusCode::kUnauthenticated));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string log = server().ReadLog();
  const size_t lines = CountLines(log, "authentication failed");
  std::printf("%d failed proofs, %zu log lines\n", kAttempts, lines);
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 3u) << FileTail(server().log_path(), 4000);
  // The count held back is in the next line of its kind; and members still
  // get in.
  auto client = Worker(0);
  ASSERT_TRUE(client.ok()) << client.status();
}

TEST_P(HostilePeersTest, SixtyFourWorkersStartedAtOnceAllConnect) {
  constexpr uint32_t kWorkers = 64;
  std::vector<std::unique_ptr<worker::PsClient>> clients(kWorkers);
  std::vector<Status> failures(kWorkers);
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto c = Worker(w);
      if (c.ok()) {
        clients[w] = std::move(*c);
      } else {
        failures[w] = c.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EXPECT_TRUE(failures[w].ok()) << "worker " << w << ": " << failures[w];
  }
}

INSTANTIATE_TEST_SUITE_P(Secret, HostilePeersTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "with_secret" : "no_secret";
                         });

}  // namespace
}  // namespace ps::testing
