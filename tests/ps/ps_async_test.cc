// Async integration test: 2 ps_server processes (2 apply threads each),
// 3 worker processes, on shm and on tcp. Each worker runs a pusher thread and
// a puller thread at once for 10 s (x PS_TEST_SCALE: CMake sets 0.3 for
// sanitizer builds, which run several times slower; release keeps 10 s),
// pushing random batches of integer-valued gradients into a "sum" table and
// counting what it pushed per key. At the end every worker waits until its
// pushes are applied (WaitApplied) and meets the others (Barrier); then each
// pulls every key and checks that the rows equal the sum of everything all
// workers pushed: no update is lost. The gradients are small positive
// integers and every row stays below 2^24, so every partial sum is exact in
// fp32 whatever the order of application.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/core/process_harness.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

constexpr uint32_t kTable = 1;
constexpr uint32_t kWorkers = 3;
constexpr uint32_t kDim = 2;
constexpr uint64_t kKeys = 2000;
constexpr size_t kBatch = 64;
// A worker stops pushing to a key whose count reached this: 3 workers x
// 2^21 x (dim index + 1 <= 2) < 2^24 keeps every row exact.
constexpr int64_t kPerWorkerKeyBudget = int64_t{1} << 21;

constexpr char kTables[] = R"(
table { id: 1 name: "async_sum" kind: HASHED dim: 2 capacity: 65536
        push_value_type: FP32 optimizer { name: "sum" } }
)";

uint64_t KeyOf(uint64_t k) { return (k + 1) * 0xD6E8FEB86659FD93ULL; }

int AsyncWorker(LineChannel& ch, const TestCluster& cluster, uint32_t w,
                double seconds) {
  PS_CHILD_ASSIGN(auto client, ConnectWorker(cluster, w));
  std::vector<int64_t> pushed(kKeys, 0);  // per key: sum of the multipliers
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  int64_t pushes = 0, pulls = 0;
  std::string pusher_error, puller_error;

  std::thread pusher([&] {
    std::mt19937_64 rng(1000 + w);
    std::vector<uint64_t> keys;
    std::vector<float> grads;
    while (!stop.load(std::memory_order_relaxed)) {
      keys.clear();
      grads.clear();
      for (size_t i = 0; i < kBatch; ++i) {
        uint64_t k = rng() % kKeys;
        int64_t c = 1 + static_cast<int64_t>(rng() % 3);
        if (pushed[k] + c > kPerWorkerKeyBudget) continue;
        pushed[k] += c;  // duplicates in one batch are fine: they add up
        keys.push_back(KeyOf(k));
        for (uint32_t j = 0; j < kDim; ++j)
          grads.push_back(static_cast<float>(c * (j + 1)));
      }
      Status s = pushes % 2 == 0
                     ? client->Push(kTable, keys, grads)
                     : client->PushAsync(kTable, keys, grads).Wait();
      if (!s.ok()) {
        pusher_error = s.ToString();
        failed = true;
        return;
      }
      ++pushes;
    }
  });
  std::thread puller([&] {
    std::mt19937_64 rng(2000 + w);
    std::vector<uint64_t> keys(256);
    std::vector<float> out(keys.size() * kDim);
    while (!stop.load(std::memory_order_relaxed)) {
      for (auto& k : keys) k = KeyOf(rng() % kKeys);
      Status s = pulls % 2 == 0 ? client->Pull(kTable, keys, out)
                                : client->PullAsync(kTable, keys, out).Wait();
      if (!s.ok()) {
        puller_error = s.ToString();
        failed = true;
        return;
      }
      ++pulls;
    }
  });
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (!failed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  pusher.join();
  puller.join();
  PS_CHILD_CHECK(pusher_error.empty(), "push: " + pusher_error);
  PS_CHILD_CHECK(puller_error.empty(), "pull: " + puller_error);
  PS_CHILD_OK(client->WaitApplied());
  PS_CHILD_OK(client->Barrier());

  std::ostringstream report;
  report << "sums " << pushes << " " << pulls;
  for (int64_t c : pushed) report << " " << c;
  PS_CHILD_CHECK(ch.Send(report.str()));

  // The parent answers with the totals of all workers per key.
  auto line = ch.Receive(120000 * SlowdownFactor());
  PS_CHILD_CHECK(line.has_value(), "no totals from the parent");
  std::vector<std::string> words = SplitWords(*line);
  PS_CHILD_CHECK(words.size() == kKeys + 1 && words[0] == "expect", *line);
  ExpectedRows expected(cluster.table(kTable), cluster.options().num_servers);
  std::vector<uint64_t> keys(kKeys);
  for (uint64_t k = 0; k < kKeys; ++k) {
    keys[k] = KeyOf(k);
    double total = std::stod(words[k + 1]);
    float row[kDim];
    for (uint32_t j = 0; j < kDim; ++j)
      row[j] = static_cast<float>(total * (j + 1));
    expected.Add(keys[k], row);
  }
  std::vector<float> out(kKeys * kDim);
  PS_CHILD_OK(client->Pull(kTable, keys, out));
  std::string diff =
      CompareRows(expected, keys, out, [](uint64_t, uint32_t) { return 0.0; });
  PS_CHILD_CHECK(ch.Send(diff.empty() ? std::string("ok")
                                      : "lost updates: " +
                                            diff.substr(0, diff.find('\n'))));
  PS_CHILD_CHECK(diff.empty(), diff);
  return 0;
}

class AsyncTest : public ::testing::TestWithParam<xfer::TransportChoice> {};

TEST_P(AsyncTest, ConcurrentPushesAndPullsLoseNoUpdate) {
  const double seconds = 10.0 * TestScale();
  ClusterOptions o;
  o.num_servers = 2;
  o.num_workers = kWorkers;
  o.consistency = proto::CONSISTENCY_ASYNC;
  o.apply_threads = 2;
  o.transport = GetParam();
  o.tables = kTables;
  auto cluster = TestCluster::Start(o, "async");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const TestCluster& c = **cluster;
  std::vector<ChildProcess> workers;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.push_back(ChildProcess::Start(
        "worker-" + std::to_string(w), [&c, w, seconds](LineChannel& ch) {
          return AsyncWorker(ch, c, w, seconds);
        }));
  }
  const int timeout_ms =
      static_cast<int>(seconds * 1000) + 60000 * SlowdownFactor();
  std::vector<int64_t> totals(kKeys, 0);
  for (uint32_t w = 0; w < kWorkers; ++w) {
    auto line = workers[w].channel().Receive(timeout_ms);
    ASSERT_TRUE(line.has_value()) << "worker " << w << " sent no sums";
    std::vector<std::string> words = SplitWords(*line);
    ASSERT_EQ(words.size(), kKeys + 3) << line->substr(0, 200);
    ASSERT_EQ(words[0], "sums");
    const int64_t pushes = std::stoll(words[1]), pulls = std::stoll(words[2]);
    std::printf(
        "worker %u (%s): %lld pushes of up to %zu keys, %lld pulls of "
        "256 keys in %.1f s\n",
        w, TransportFlag(GetParam()).c_str(), static_cast<long long>(pushes),
        kBatch, static_cast<long long>(pulls), seconds);
    EXPECT_GT(pushes, 0);
    EXPECT_GT(pulls, 0);
    for (uint64_t k = 0; k < kKeys; ++k) totals[k] += std::stoll(words[k + 3]);
  }
  std::string expect = "expect";
  for (int64_t t : totals) expect += " " + std::to_string(t);
  for (auto& worker : workers) ASSERT_TRUE(worker.channel().Send(expect));
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(workers[w].channel().Receive(timeout_ms).value_or("no answer"),
              "ok")
        << "worker " << w;
    EXPECT_EQ(WaitChild(workers[w], timeout_ms), 0) << "worker " << w;
  }
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

INSTANTIATE_TEST_SUITE_P(Transports, AsyncTest, ClusterTransports(),
                         TransportParamName());

}  // namespace
}  // namespace ps::testing
