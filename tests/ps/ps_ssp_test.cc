// SSP integration test (staleness 2): 2 ps_server processes, 3 worker
// processes of different speeds (a step takes 0, 2 and 6 ms plus the work),
// on shm and on tcp. Each worker pushes one row per step and calls Clock()
// kSteps times; after every Clock() it records its clock, MinClock() and
// the CLOCK_MONOTONIC times at which the call began and returned. Checked:
//   - no worker ever observes itself more than 2 clocks ahead of the
//     slowest (clock - MinClock <= 2), and the fast worker does run ahead
//     (the largest gap observed is exactly 2: SSP, not BSP);
//   - across processes: when worker w's Clock() returned clock c, every
//     other worker had already entered its Clock() call number c - 2 (a
//     worker's clock word can only be c - 2 after that call began);
//   - after WaitApplied + Barrier every pushed row holds its exact count.
#include <gtest/gtest.h>

#include <chrono>
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
constexpr uint32_t kSteps = 30;
constexpr uint32_t kStaleness = 2;
constexpr int kStepSleepMs[kWorkers] = {0, 2, 6};

constexpr char kTables[] = R"(
table { id: 1 name: "ssp_sum" kind: HASHED dim: 1 capacity: 4096
        push_value_type: FP32 optimizer { name: "sum" } }
)";

struct Observation {
  uint64_t clock = 0, min_clock = 0;
  int64_t enter_ns = 0, return_ns = 0;
};

uint64_t KeyOf(uint32_t w) { return 7777 + w; }

int SspWorker(LineChannel& ch, const TestCluster& cluster, uint32_t w) {
  PS_CHILD_ASSIGN(auto client, ConnectWorker(cluster, w));
  std::ostringstream report;
  report << "obs";
  for (uint32_t t = 0; t < kSteps; ++t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kStepSleepMs[w]));
    const uint64_t key = KeyOf(w);
    const float one = 1.0f;
    PS_CHILD_OK(client->Push(kTable, std::span(&key, 1), std::span(&one, 1)));
    Observation o;
    o.enter_ns = MonotonicNanos();
    PS_CHILD_ASSIGN(o.clock, client->Clock());
    o.return_ns = MonotonicNanos();
    PS_CHILD_ASSIGN(o.min_clock, client->MinClock());
    PS_CHILD_CHECK(o.clock == t + 1, "clock " + std::to_string(o.clock));
    report << " " << o.clock << "," << o.min_clock << "," << o.enter_ns << ","
           << o.return_ns;
  }
  PS_CHILD_OK(client->WaitApplied());
  PS_CHILD_OK(client->Barrier());
  std::vector<uint64_t> keys;
  for (uint32_t v = 0; v < kWorkers; ++v) keys.push_back(KeyOf(v));
  std::vector<float> rows(kWorkers);
  PS_CHILD_OK(client->Pull(kTable, keys, rows));
  for (uint32_t v = 0; v < kWorkers; ++v) {
    PS_CHILD_CHECK(rows[v] == static_cast<float>(kSteps),
                   "row of worker " + std::to_string(v) + " is " +
                       std::to_string(rows[v]));
  }
  PS_CHILD_CHECK(ch.Send(report.str()));
  return 0;
}

class SspTest : public ::testing::TestWithParam<xfer::TransportChoice> {};

TEST_P(SspTest, NoWorkerIsEverMoreThanStalenessClocksAhead) {
  ClusterOptions o;
  o.num_servers = 2;
  o.num_workers = kWorkers;
  o.consistency = proto::CONSISTENCY_SSP;
  o.staleness = kStaleness;
  o.transport = GetParam();
  o.tables = kTables;
  auto cluster = TestCluster::Start(o, "ssp");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const TestCluster& c = **cluster;
  std::vector<ChildProcess> workers;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.push_back(ChildProcess::Start(
        "worker-" + std::to_string(w),
        [&c, w](LineChannel& ch) { return SspWorker(ch, c, w); }));
  }
  const int timeout_ms = 60000 * SlowdownFactor();
  std::vector<std::vector<Observation>> obs(kWorkers);
  for (uint32_t w = 0; w < kWorkers; ++w) {
    auto line = workers[w].channel().Receive(timeout_ms);
    ASSERT_TRUE(line.has_value()) << "worker " << w << " sent no report";
    std::vector<std::string> words = SplitWords(*line);
    ASSERT_EQ(words.size(), kSteps + 1) << *line;
    for (uint32_t t = 0; t < kSteps; ++t) {
      Observation x;
      ASSERT_EQ(std::sscanf(words[t + 1].c_str(), "%lu,%lu,%ld,%ld", &x.clock,
                            &x.min_clock, &x.enter_ns, &x.return_ns),
                4)
          << words[t + 1];
      obs[w].push_back(x);
    }
  }
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(WaitChild(workers[w], timeout_ms), 0) << "worker " << w;
  }

  uint64_t max_gap = 0;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    for (const Observation& x : obs[w]) {
      ASSERT_LE(x.min_clock, x.clock) << "worker " << w;
      const uint64_t gap = x.clock - x.min_clock;
      max_gap = std::max(max_gap, gap);
      EXPECT_LE(gap, kStaleness) << "worker " << w << " at clock " << x.clock
                                 << " saw min clock " << x.min_clock;
      if (x.clock <= kStaleness) continue;
      for (uint32_t v = 0; v < kWorkers; ++v) {
        // Worker v's Clock() call number x.clock - 2 is obs[v][x.clock - 3].
        const Observation& slow = obs[v][x.clock - kStaleness - 1];
        EXPECT_LT(slow.enter_ns, x.return_ns)
            << "worker " << w << " returned from clock " << x.clock
            << " before worker " << v << " began clock " << slow.clock;
      }
    }
  }
  EXPECT_EQ(max_gap, kStaleness)
      << "the fastest worker never ran the full staleness ahead";
  std::printf("%s: largest observed gap %lu clocks\n",
              TransportFlag(GetParam()).c_str(), max_gap);
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

INSTANTIATE_TEST_SUITE_P(Transports, SspTest, ClusterTransports(),
                         TransportParamName());

}  // namespace
}  // namespace ps::testing
