// PsClient against a real ps_server process: several trainer threads push
// and pull the same table at once (run under TSan too), and every pushed
// gradient ends up in the rows exactly (optimizer "sum", integer values).
// Covers both pull paths (whole-table reads and sorted, coalesced ReadV)
// and both push paths (dense sums and radix-sorted dedup).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/ps_client.h"
#include "client/shard_router.h"

namespace ps::worker {
namespace {

class ServerProcess {
 public:
  ServerProcess(const std::string& dir, const std::string& tables_text,
                const std::string& transport) {
    const std::string tables = dir + "/t.tables";
    std::ofstream(tables) << tables_text;
    port_file_ = dir + "/port";
    pid_ = fork();
    if (pid_ == 0) {
      const std::string a1 = "--tables=" + tables;
      const std::string a2 = "--port_file=" + port_file_;
      const std::string a3 = "--transport=" + transport;
      execl(PS_SERVER_BIN, PS_SERVER_BIN, a1.c_str(), a2.c_str(), a3.c_str(),
            "--port=0", "--num_workers=1", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string Address() {
    for (int i = 0; i < 300; ++i) {
      std::ifstream f(port_file_);
      std::string a;
      if (f >> a && !a.empty()) return a;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }

 private:
  pid_t pid_ = -1;
  std::string port_file_;
};

class PsClientThreadsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PsClientThreadsTest, ConcurrentPushAndPullLoseNothing) {
  char tmpl[] = "/tmp/ps_client_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  // Table 1: 4096 rows x dim 2 (pushes of 2000 keys take the dense path,
  // pulls of 64 keys the sparse one); table 2: 1M rows x dim 1 (pushes of
  // 2000 keys take the sorted path).
  ServerProcess server(tmpl,
                       "table { id: 1 name: \"small\" kind: HASHED dim: 2 "
                       "capacity: 4096 optimizer { name: \"sum\" } }\n"
                       "table { id: 2 name: \"big\" kind: HASHED dim: 1 "
                       "capacity: 1000000 optimizer { name: \"sum\" } }\n"
                       "table { id: 3 name: \"wide\" kind: HASHED dim: 1 "
                       "capacity: 262144 optimizer { name: \"sum\" } }\n",
                       GetParam());
  PsClient::Options o;
  o.servers = {server.Address()};
  ASSERT_FALSE(o.servers[0].empty()) << "ps_server did not start";
  o.xfer.transport = GetParam() == "tcp" ? xfer::TransportChoice::kTcp
                                         : xfer::TransportChoice::kShm;
  o.xfer.peer_timeout_ms = 20000;
  auto client_or = PsClient::Connect(o);
  ASSERT_TRUE(client_or.ok()) << client_or.status();
  auto client = std::move(client_or).value();
  ASSERT_NE(client->table("small"), nullptr);

  constexpr int kThreads = 4, kRounds = 5, kKeys = 2000;
  std::vector<std::thread> threads;
  std::vector<Status> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint64_t> keys(kKeys);
      for (int i = 0; i < kKeys; ++i) keys[i] = i % 500;  // 4 copies each
      std::vector<float> g2(kKeys * 2, 1.0f), g1(kKeys, 1.0f);
      std::vector<uint64_t> few = {1, 2, 3, 400, 401, 402, 499};
      std::vector<float> out(few.size() * 2), out1(few.size());
      for (int r = 0; r < kRounds; ++r) {
        Status s = client->Push(1, keys, g2);
        if (s.ok()) s = client->Push(2, keys, g1);
        if (s.ok()) s = client->Pull(1, few, out);
        if (s.ok()) s = client->Pull(2, few, out1);
        if (s.ok()) s = client->Pull(1, keys, g2);  // whole-table path
        if (s.ok()) std::fill(g2.begin(), g2.end(), 1.0f);
        if (!s.ok()) {
          errors[t] = s;
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const Status& s : errors) ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(client->WaitApplied().ok());

  // Every key 0..499 was pushed 4 times per push, kThreads * kRounds pushes;
  // keys that hash to the same row share it, so a row holds
  // want * (keys mapped to it).
  const float want = 4.0f * kThreads * kRounds;
  std::vector<uint64_t> keys(500);
  for (int i = 0; i < 500; ++i) keys[i] = i;
  for (uint32_t id : {1u, 2u}) {
    const proto::TableSpec& spec = *client->table(id);
    ShardRouter loc(spec, 1);
    std::map<uint64_t, int> keys_per_row;
    for (uint64_t k : keys) ++keys_per_row[loc.GlobalRow(k)];
    std::vector<float> out(500 * spec.dim());
    ASSERT_TRUE(client->Pull(id, keys, out).ok());
    for (int i = 0; i < 500; ++i) {
      for (uint32_t j = 0; j < spec.dim(); ++j) {
        ASSERT_EQ(out[i * spec.dim() + j],
                  want * keys_per_row[loc.GlobalRow(keys[i])])
            << "table " << id << " key " << i;
      }
    }
  }
  // A push of 2^20 keys splits its sums over the client's threads.
  {
    std::vector<uint64_t> many(1 << 20);
    for (size_t i = 0; i < many.size(); ++i) many[i] = i % 1024;
    std::vector<float> ones(many.size(), 1.0f);
    ASSERT_TRUE(client->Push(3, many, ones).ok());
    ASSERT_TRUE(client->WaitApplied().ok());
    ShardRouter loc(*client->table(3), 1);
    std::map<uint64_t, int> keys_per_row;
    for (uint64_t k = 0; k < 1024; ++k) ++keys_per_row[loc.GlobalRow(k)];
    std::vector<uint64_t> k1024(1024);
    for (uint64_t k = 0; k < 1024; ++k) k1024[k] = k;
    std::vector<float> out(1024);
    ASSERT_TRUE(client->Pull(3, k1024, out).ok());
    for (uint64_t k = 0; k < 1024; ++k) {
      ASSERT_EQ(out[k], 1024.0f * keys_per_row[loc.GlobalRow(k)]) << k;
    }
  }
  auto stats = client->Stats(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->packets_rejected(), 0u);
  rmdir(tmpl);
}

INSTANTIATE_TEST_SUITE_P(Transports, PsClientThreadsTest,
                         ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace ps::worker
