// PsClient::PushFromDevice on a real GPU against a 2-server BSP cluster (shm
// and tcp): for each pair of tables with the same spec, one gets a host push
// and the other the same gradient pushed from device memory, and after every
// Clock the pulled rows must be the same:
//   - HASHED, fp32, SGD lr 1, integer gradients with duplicate keys: the
//     device gradient is summed by global row (protocol::ShardMap); both
//     tables hold exactly -sum(gradients) by key, and sent_rows is exactly
//     the set of nonzero rows;
//   - DENSE, fp32 (101 rows: unequal shards): PushDense against the whole
//     table from device, then shard 1 alone from device against a host Push
//     of that shard's keys; rows bit-identical and exact;
//   - DENSE, fp16 push values, non-integer gradients: host and device
//     quantize alike (protocol/cuda/device_packer.h), so the rows are
//     bit-identical.
// Built only where ps_kernels_cuda exists; skips with the reason when no
// CUDA device is usable. The client lives in the test process (nothing is
// forked after the CUDA runtime starts; servers are fork + exec).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/gpu_kernels.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

namespace gpu = kernels::gpu;
using worker::PsClient;

constexpr uint32_t kHostHashed = 1, kDevHashed = 2;
constexpr uint32_t kHostDense = 3, kDevDense = 4;
constexpr uint32_t kHostFp16 = 5, kDevFp16 = 6;
constexpr uint32_t kHashedDim = 4, kHashedRows = 1000;
constexpr uint32_t kDenseDim = 3, kDenseRows = 101;
constexpr uint32_t kFp16Dim = 4, kFp16Rows = 64;
constexpr uint32_t kSteps = 3;

constexpr char kTables[] = R"(
table { id: 1 name: "host_hashed" kind: HASHED dim: 4 capacity: 1000
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 2 name: "dev_hashed" kind: HASHED dim: 4 capacity: 1000
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 3 name: "host_dense" kind: DENSE dim: 3 capacity: 101
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 4 name: "dev_dense" kind: DENSE dim: 3 capacity: 101
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 5 name: "host_fp16" kind: DENSE dim: 4 capacity: 64
        push_value_type: FP16 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 6 name: "dev_fp16" kind: DENSE dim: 4 capacity: 64
        push_value_type: FP16 optimizer { name: "sgd" learning_rate: 1 } }
)";

uint64_t KeyOf(uint64_t k) { return k * 0x9E3779B97F4A7C15ULL + 777; }

// Integer values in [-4, 4], zero for about a third.
float IntGrad(uint64_t a, uint64_t b, uint32_t t) {
  return static_cast<float>(static_cast<int>((a * 7 + b * 11 + t * 5) % 9) - 4);
}

// Copies `host` into fresh device memory.
StatusOr<gpu::DeviceBuffer> Upload(const std::vector<float>& host) {
  PS_ASSIGN_OR_RETURN(gpu::DeviceBuffer b,
                      gpu::DeviceBuffer::Allocate(host.size() * sizeof(float)));
  PS_RETURN_IF_ERROR(b.CopyFromHost(host.data(), host.size() * sizeof(float)));
  return b;
}

std::span<const float> Floats(const gpu::DeviceBuffer& b) {
  return {b.as<const float>(), b.size() / sizeof(float)};
}

// The rows of `g` (dim floats each) with a nonzero value, plus `offset`.
std::vector<uint64_t> NonzeroRows(const std::vector<float>& g, uint32_t dim,
                                  uint64_t offset = 0) {
  std::vector<uint64_t> rows;
  for (size_t r = 0; r * dim < g.size(); ++r) {
    if (std::any_of(g.begin() + r * dim, g.begin() + (r + 1) * dim,
                    [](float v) { return v != 0.0f; })) {
      rows.push_back(r + offset);
    }
  }
  return rows;
}

class DevicePushGpuTest
    : public ::testing::TestWithParam<xfer::TransportChoice> {
 protected:
  void SetUp() override {
    const Status available = PsClient::DevicePushAvailable();
    if (!available.ok()) GTEST_SKIP() << available.ToString();
  }
};

TEST_P(DevicePushGpuTest, DeviceRowsEqualHostRows) {
  ClusterOptions o;
  o.num_servers = 2;
  o.num_workers = 1;
  o.consistency = proto::CONSISTENCY_BSP;
  o.transport = GetParam();
  o.tables = kTables;
  auto cluster = TestCluster::Start(o, "devpush_gpu");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const TestCluster& tc = **cluster;
  {
    auto connected = ConnectWorker(tc, 0);
    ASSERT_TRUE(connected.ok()) << connected.status();
    PsClient& c = **connected;
    ExpectedRows host_hashed(tc.table(kHostHashed), 2);
    ExpectedRows dev_hashed(tc.table(kDevHashed), 2);
    const protocol::ShardMap dense_map =
        protocol::ShardMap::ForTable(tc.table(kDevDense), 2);
    std::vector<uint64_t> all_keys;  // every hashed key pushed
    for (uint64_t k = 0; k < 400; ++k) all_keys.push_back(KeyOf(k));
    std::vector<double> dense_sum(kDenseRows * kDenseDim, 0.0);
    std::vector<uint64_t> sent;

    for (uint32_t t = 0; t < kSteps; ++t) {
      SCOPED_TRACE("step " + std::to_string(t));
      // HASHED: keys with duplicates (the first 50 twice).
      std::vector<uint64_t> keys;
      for (uint64_t k = t * 50; k < t * 50 + 250; ++k) keys.push_back(KeyOf(k));
      for (size_t i = 0; i < 50; ++i) keys.push_back(keys[i]);
      std::vector<float> g(keys.size() * kHashedDim);
      std::vector<float> by_row(kHashedRows * kHashedDim, 0.0f);
      for (size_t i = 0; i < keys.size(); ++i) {
        for (uint32_t j = 0; j < kHashedDim; ++j) {
          g[i * kHashedDim + j] = IntGrad(keys[i] % 1000, i + j, t);
        }
        auto row = std::span(g).subspan(i * kHashedDim, kHashedDim);
        host_hashed.Add(keys[i], row, -1.0);
        dev_hashed.Add(keys[i], row, -1.0);
        const uint64_t r = dev_hashed.map().GlobalRow(keys[i]);
        for (uint32_t j = 0; j < kHashedDim; ++j) {
          by_row[r * kHashedDim + j] += row[j];
        }
      }
      ASSERT_TRUE(c.Push(kHostHashed, keys, g).ok());
      auto dev = Upload(by_row);
      ASSERT_TRUE(dev.ok()) << dev.status();
      Status pushed =
          c.PushFromDevice(kDevHashed, Floats(*dev), c.kAllShards, &sent);
      ASSERT_TRUE(pushed.ok()) << pushed;
      EXPECT_EQ(sent, NonzeroRows(by_row, kHashedDim));

      // DENSE fp32: the whole table at even steps, shard 1 alone at odd.
      std::vector<float> dense(kDenseRows * kDenseDim);
      for (size_t i = 0; i < dense.size(); ++i) {
        dense[i] = (i / kDenseDim) % 4 == t ? 0.0f : IntGrad(i, 3, t);
      }
      if (t % 2 == 0) {
        ASSERT_TRUE(c.PushDense(kHostDense, dense).ok());
        auto d = Upload(dense);
        ASSERT_TRUE(d.ok()) << d.status();
        pushed = c.PushFromDevice(kDevDense, Floats(*d), c.kAllShards, &sent);
        ASSERT_TRUE(pushed.ok()) << pushed;
        EXPECT_EQ(sent, NonzeroRows(dense, kDenseDim));
        for (size_t i = 0; i < dense.size(); ++i) dense_sum[i] += dense[i];
      } else {
        const uint64_t first = dense_map.FirstRow(1),
                       rows = dense_map.RowsOf(1);
        std::vector<float> part(dense.begin() + first * kDenseDim,
                                dense.begin() + (first + rows) * kDenseDim);
        std::vector<uint64_t> part_keys;
        for (uint64_t r = 0; r < rows; ++r) part_keys.push_back(first + r);
        ASSERT_TRUE(c.Push(kHostDense, part_keys, part).ok());
        auto d = Upload(part);
        ASSERT_TRUE(d.ok()) << d.status();
        pushed = c.PushFromDevice(kDevDense, Floats(*d), 1, &sent);
        ASSERT_TRUE(pushed.ok()) << pushed;
        EXPECT_EQ(sent, NonzeroRows(part, kDenseDim, first));
        for (size_t i = 0; i < part.size(); ++i) {
          dense_sum[first * kDenseDim + i] += part[i];
        }
      }

      // DENSE fp16: non-integer values; the host pushes the nonzero rows.
      std::vector<float> h(kFp16Rows * kFp16Dim);
      for (size_t i = 0; i < h.size(); ++i) {
        h[i] = (i / kFp16Dim) % 5 == t ? 0.0f : IntGrad(i, 1, t) * 0.3183f;
      }
      std::vector<uint64_t> h_keys = NonzeroRows(h, kFp16Dim);
      std::vector<float> h_vals;
      for (uint64_t r : h_keys) {
        h_vals.insert(h_vals.end(), h.begin() + r * kFp16Dim,
                      h.begin() + (r + 1) * kFp16Dim);
      }
      ASSERT_TRUE(c.Push(kHostFp16, h_keys, h_vals).ok());
      auto dh = Upload(h);
      ASSERT_TRUE(dh.ok()) << dh.status();
      pushed = c.PushFromDevice(kDevFp16, Floats(*dh), c.kAllShards, &sent);
      ASSERT_TRUE(pushed.ok()) << pushed;
      EXPECT_EQ(sent, h_keys);

      // BSP: the clock returns once every push of the step is applied.
      auto clock = c.Clock();
      ASSERT_TRUE(clock.ok()) << clock.status();

      auto exact = [](uint64_t, uint32_t) { return 0.0; };
      std::vector<float> a(all_keys.size() * kHashedDim);
      std::vector<float> b(a.size());
      ASSERT_TRUE(c.Pull(kHostHashed, all_keys, a).ok());
      ASSERT_TRUE(c.Pull(kDevHashed, all_keys, b).ok());
      EXPECT_EQ(CompareRows(host_hashed, all_keys, a, exact), "");
      EXPECT_EQ(CompareRows(dev_hashed, all_keys, b, exact), "");

      std::vector<float> da(kDenseRows * kDenseDim), db(da.size());
      ASSERT_TRUE(c.PullDense(kHostDense, da).ok());
      ASSERT_TRUE(c.PullDense(kDevDense, db).ok());
      EXPECT_EQ(da, db);
      for (size_t i = 0; i < db.size(); ++i) {
        ASSERT_EQ(db[i], static_cast<float>(-dense_sum[i])) << "value " << i;
      }

      std::vector<float> fa(kFp16Rows * kFp16Dim), fb(fa.size());
      ASSERT_TRUE(c.PullDense(kHostFp16, fa).ok());
      ASSERT_TRUE(c.PullDense(kDevFp16, fb).ok());
      EXPECT_EQ(fa, fb);
    }
  }
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

INSTANTIATE_TEST_SUITE_P(Transports, DevicePushGpuTest, ClusterTransports(),
                         TransportParamName());

}  // namespace
}  // namespace ps::testing
