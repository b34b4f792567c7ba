// BSP integration test: 2 ps_server processes, 3 worker processes, on shm and
// on tcp. Every worker pushes known gradients on overlapping keys (with
// duplicates inside one push), calls Clock(), and then checks every pulled
// row against the exact expected value, step after step:
//   - fp32, SGD with learning rate 1 from zero rows: row = -sum(gradients),
//     exactly (integer-valued gradients, so every sum is exact in fp32);
//   - fp16 push values: |row - exact| <= (2^-11 + 2^-19) * sum|gradients| +
//     1e-6 (fp16 rounds each pushed value by at most 2^-11 relative,
//     kernels/quantize.h; 2^-19 covers the server's fp32 additions);
//   - top-k (25 %) with error feedback, fp32: while residuals are held back
//     some rows differ from the full sum; after FlushResiduals on every
//     worker and a Clock (BSP: all pushes applied) every row is exact;
//   - fp32 and fp16 again with the servers' tables on a GPU
//     (--device=cuda:0): the same exact sums and bounds as the host path,
//     skipped where no CUDA device is usable.
// Keys are spread over a 1000-row table, so many keys share a row: the
// expectation sums by global row (protocol::ShardMap), which also checks
// that the client places keys exactly where the shard map says.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "table/device_param_table.h"
#include "tests/core/process_harness.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

constexpr uint32_t kFp32Table = 1;
constexpr uint32_t kFp16Table = 2;
constexpr uint32_t kTopKTable = 3;
constexpr uint32_t kWorkers = 3;
constexpr uint32_t kSteps = 4;

constexpr char kTables[] = R"(
table { id: 1 name: "bsp_fp32" kind: HASHED dim: 4 capacity: 1000
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 2 name: "bsp_fp16" kind: HASHED dim: 4 capacity: 1000
        push_value_type: FP16 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 3 name: "bsp_topk" kind: HASHED dim: 4 capacity: 1000
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 }
        sparsify { method: "topk" topk_fraction: 0.25 } }
)";

enum class Mode { kFp32, kFp16, kTopK };

uint64_t KeyOf(uint64_t k) { return k * 0x9E3779B97F4A7C15ULL + 12345; }

// Worker w's keys at step t: a window overlapping its neighbours', thinned
// per step, then the first 16 again (duplicates the client must sum).
std::vector<uint64_t> WorkerKeys(uint32_t w, uint32_t t) {
  std::vector<uint64_t> keys;
  for (uint64_t k = w * 150; k < w * 150 + 300; ++k) {
    if ((k + t) % 4 != 0) keys.push_back(KeyOf(k));
  }
  for (size_t i = 0; i < 16; ++i) keys.push_back(keys[i]);
  return keys;
}

// Every key any worker pushes, once.
std::vector<uint64_t> AllKeys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < (kWorkers - 1) * 150 + 300; ++k)
    keys.push_back(KeyOf(k));
  return keys;
}

std::vector<float> Gradients(uint32_t w, uint32_t t,
                             const std::vector<uint64_t>& keys, Mode mode) {
  std::vector<float> g(keys.size() * 4);
  for (size_t i = 0; i < keys.size(); ++i) {
    for (uint32_t j = 0; j < 4; ++j) {
      int v = static_cast<int>(
                  (keys[i] % 1000 * 7 + w * 3 + t * 5 + j * 11 + i) % 9) -
              4;
      g[i * 4 + j] = mode == Mode::kFp16 ? static_cast<float>(v) * 0.3183f
                                         : static_cast<float>(v);
    }
  }
  return g;
}

// One worker's whole run; reports "ok <rows differing before the flush>".
int BspWorker(LineChannel& ch, const TestCluster& cluster, uint32_t w,
              Mode mode) {
  const uint32_t table = mode == Mode::kFp32   ? kFp32Table
                         : mode == Mode::kFp16 ? kFp16Table
                                               : kTopKTable;
  PS_CHILD_ASSIGN(auto client, ConnectWorker(cluster, w));
  PS_CHILD_CHECK(client->table(table) != nullptr);
  ExpectedRows expected(cluster.table(table), cluster.options().num_servers);
  const std::vector<uint64_t> all_keys = AllKeys();
  std::vector<float> pulled(all_keys.size() * 4);
  auto exact = [](uint64_t, uint32_t) { return 0.0; };
  auto fp16_bound = [&](uint64_t key, uint32_t j) {
    return (std::ldexp(1.0, -11) + std::ldexp(1.0, -19)) *
               expected.AbsSum(key, j) +
           1e-6;
  };
  size_t held_back = 0;  // top-k: rows that differed before the flush
  for (uint32_t t = 0; t < kSteps; ++t) {
    for (uint32_t v = 0; v < kWorkers; ++v) {
      std::vector<uint64_t> keys = WorkerKeys(v, t);
      std::vector<float> g = Gradients(v, t, keys, mode);
      for (size_t i = 0; i < keys.size(); ++i)
        expected.Add(keys[i], std::span(g).subspan(i * 4, 4), -1.0);
    }
    std::vector<uint64_t> keys = WorkerKeys(w, t);
    std::vector<float> g = Gradients(w, t, keys, mode);
    if (t % 2 == 1) {
      PS_CHILD_OK(client->PushAsync(table, keys, g).Wait());
    } else {
      PS_CHILD_OK(client->Push(table, keys, g));
    }
    // Barrier() counts as a clock step too (client/worker_clock.h).
    const uint64_t before = client->clock();
    PS_CHILD_ASSIGN(uint64_t clock, client->Clock());
    PS_CHILD_CHECK(clock == before + 1, "clock " + std::to_string(clock));
    PS_CHILD_OK(client->Pull(table, all_keys, pulled));
    if (mode == Mode::kTopK) {
      std::string diff = CompareRows(expected, all_keys, pulled, exact);
      if (!diff.empty()) ++held_back;
    } else {
      std::string diff =
          mode == Mode::kFp32
              ? CompareRows(expected, all_keys, pulled, exact)
              : CompareRows(expected, all_keys, pulled, fp16_bound);
      PS_CHILD_CHECK(diff.empty(), "worker " + std::to_string(w) +
                                       " after step " + std::to_string(t) +
                                       ":\n" + diff);
    }
    // Nobody pushes step t + 1 before everyone checked step t.
    PS_CHILD_OK(client->Barrier());
  }
  if (mode == Mode::kTopK) {
    PS_CHILD_OK(client->FlushResiduals(table));
    PS_CHILD_OK(client->WaitApplied());
    const uint64_t before = client->clock();
    PS_CHILD_ASSIGN(uint64_t clock, client->Clock());
    PS_CHILD_CHECK(clock == before + 1, "clock " + std::to_string(clock));
    PS_CHILD_OK(client->Pull(table, all_keys, pulled));
    std::string diff = CompareRows(expected, all_keys, pulled, exact);
    PS_CHILD_CHECK(diff.empty(), "worker " + std::to_string(w) +
                                     " after the flush:\n" + diff);
    PS_CHILD_OK(client->Barrier());
  }
  ch.Send("ok " + std::to_string(held_back));
  return 0;
}

class BspTest : public ::testing::TestWithParam<xfer::TransportChoice> {
 protected:
  // Runs the 3 workers against a fresh 2-server BSP cluster; returns each
  // worker's report.
  std::vector<std::string> Run(Mode mode,
                               std::vector<std::string> server_flags = {}) {
    ClusterOptions o;
    o.extra_flags = std::move(server_flags);
    o.num_servers = 2;
    o.num_workers = kWorkers;
    o.consistency = proto::CONSISTENCY_BSP;
    o.transport = GetParam();
    o.tables = kTables;
    auto cluster = TestCluster::Start(o, "bsp");
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    if (!cluster.ok()) return {};
    const TestCluster& c = **cluster;
    std::vector<ChildProcess> workers;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      workers.push_back(ChildProcess::Start("worker-" + std::to_string(w),
                                            [&c, w, mode](LineChannel& ch) {
                                              return BspWorker(ch, c, w, mode);
                                            }));
    }
    std::vector<std::string> reports;
    const int timeout_ms = 60000 * SlowdownFactor();
    for (uint32_t w = 0; w < kWorkers; ++w) {
      reports.push_back(
          workers[w].channel().Receive(timeout_ms).value_or("no report"));
    }
    for (uint32_t w = 0; w < kWorkers; ++w) {
      EXPECT_EQ(WaitChild(workers[w], timeout_ms), 0) << "worker " << w;
    }
    Status stopped = (*cluster)->Stop();
    EXPECT_TRUE(stopped.ok()) << stopped;
    return reports;
  }
};

TEST_P(BspTest, Fp32SgdRowsAreExactAfterEveryClock) {
  for (const std::string& r : Run(Mode::kFp32)) EXPECT_EQ(r, "ok 0");
}

TEST_P(BspTest, Fp16RowsAreWithinTheQuantizationBound) {
  for (const std::string& r : Run(Mode::kFp16)) EXPECT_EQ(r, "ok 0");
}

TEST_P(BspTest, TopKWithErrorFeedbackIsExactOnceResidualsAreFlushed) {
  std::vector<std::string> reports = Run(Mode::kTopK);
  ASSERT_EQ(reports.size(), kWorkers);
  for (const std::string& r : reports) {
    ASSERT_EQ(r.rfind("ok ", 0), 0u) << r;
    // Top-k sent a quarter of the rows per push: before the flush some
    // rows must have lacked their held-back residual.
    EXPECT_GT(std::stoi(r.substr(3)), 0) << "top-k held nothing back";
  }
}

TEST_P(BspTest, DeviceShardsGiveTheHostPathsSums) {
  if (Status s = table::DeviceParamTable::Available(); !s.ok()) {
    GTEST_SKIP() << "no usable CUDA device: " << s;
  }
  for (const std::string& r : Run(Mode::kFp32, {"--device=cuda:0"})) {
    EXPECT_EQ(r, "ok 0");
  }
  for (const std::string& r : Run(Mode::kFp16, {"--device=cuda:0"})) {
    EXPECT_EQ(r, "ok 0");
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, BspTest, ClusterTransports(),
                         TransportParamName());

}  // namespace
}  // namespace ps::testing
