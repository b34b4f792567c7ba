// PsClient::PushFromDevice in every build, with or without a GPU: against a
// 1-server cluster (shm and tcp), every bad argument is kInvalidArgument
// (unknown table, EXACT table, null or wrongly sized gradient, no such
// shard) with nothing sent, and a well-formed call is kNotSupported naming
// why when this build has no CUDA or the machine no usable device
// (DevicePushAvailable says the same). Where a device is usable, a host
// pointer is kInvalidArgument instead (not device memory). The pushes that
// really run on a device are in ps_device_push_gpu_test.cc.
//
// The client lives in the test process itself (no worker is forked), so
// the CUDA runtime may start in it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

constexpr uint32_t kHashed = 1;
constexpr uint32_t kExact = 2;
constexpr uint32_t kDense = 3;
constexpr uint32_t kDim = 2;

constexpr char kTables[] = R"(
table { id: 1 name: "dev_hashed" kind: HASHED dim: 2 capacity: 100
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
table { id: 2 name: "dev_exact" kind: EXACT dim: 2 capacity: 100
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 }
        admit_after_pushes: 1 }
table { id: 3 name: "dev_dense" kind: DENSE dim: 2 capacity: 10
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 } }
)";

class DevicePushTest : public ::testing::TestWithParam<xfer::TransportChoice> {
};

TEST_P(DevicePushTest, BadArgumentsAndNoDeviceAreStatuses) {
  ClusterOptions o;
  o.num_servers = 1;
  o.num_workers = 1;
  o.transport = GetParam();
  o.tables = kTables;
  auto cluster = TestCluster::Start(o, "devpush");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  {
    auto client = ConnectWorker(**cluster, 0);
    ASSERT_TRUE(client.ok()) << client.status();
    worker::PsClient& c = **client;
    // A host array of the right size: fine as far as the shared checks go.
    std::vector<float> host(100 * kDim, 1.0f);
    std::vector<uint64_t> sent = {7};
    auto expect_invalid = [&](const Status& s, const std::string& words) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
      EXPECT_NE(s.ToString().find(words), std::string::npos) << s;
      EXPECT_TRUE(sent.empty()) << "sent_rows kept " << sent.size();
      sent = {7};
    };
    expect_invalid(c.PushFromDevice(99, host, c.kAllShards, &sent),
                   "no table with id 99");
    expect_invalid(c.PushFromDevice(kExact, host, c.kAllShards, &sent),
                   "EXACT");
    expect_invalid(c.PushFromDevice(kHashed, std::span<const float>(),
                                    c.kAllShards, &sent),
                   "null");
    expect_invalid(c.PushFromDevice(kHashed, std::span(host).first(10),
                                    c.kAllShards, &sent),
                   "10 values");
    expect_invalid(c.PushFromDevice(kHashed, host, 1, &sent), "no shard 1");
    expect_invalid(c.PushFromDevice(kDense, host, 0, &sent), "200 values");

    // Well-formed: which answer depends on the build and the machine.
    const Status available = worker::PsClient::DevicePushAvailable();
    const Status pushed =
        c.PushFromDevice(kDense, std::span(host).first(10 * kDim), 0, &sent);
    EXPECT_TRUE(sent.empty());
#if PS_TEST_HAVE_CUDA
    if (available.ok()) {
      EXPECT_EQ(pushed.code(), StatusCode::kInvalidArgument) << pushed;
      EXPECT_NE(pushed.ToString().find("not in device memory"),
                std::string::npos)
          << pushed;
    } else {
      std::printf("no usable device: %s\n", available.ToString().c_str());
      EXPECT_EQ(available.code(), StatusCode::kNotSupported) << available;
      EXPECT_NE(available.ToString().find("cudaGetDeviceCount"),
                std::string::npos)
          << available;
      EXPECT_EQ(pushed.code(), StatusCode::kNotSupported) << pushed;
      EXPECT_NE(pushed.ToString().find("cudaGetDeviceCount"), std::string::npos)
          << pushed;
    }
#else
    std::printf("no CUDA in this build: %s\n", available.ToString().c_str());
    for (const Status* s : {&available, &pushed}) {
      EXPECT_EQ(s->code(), StatusCode::kNotSupported) << *s;
      EXPECT_NE(s->ToString().find("no CUDA support"), std::string::npos) << *s;
    }
#endif
    // Nothing above reached the server: the table is still zero.
    std::vector<float> dense(10 * kDim, -1.0f);
    ASSERT_TRUE(c.WaitApplied().ok());
    ASSERT_TRUE(c.PullDense(kDense, dense).ok());
    EXPECT_EQ(dense, std::vector<float>(10 * kDim, 0.0f));
  }
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

INSTANTIATE_TEST_SUITE_P(Transports, DevicePushTest, ClusterTransports(),
                         TransportParamName());

}  // namespace
}  // namespace ps::testing
