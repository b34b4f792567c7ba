// kernels/cuda/device_optimizers.h: the host-side pieces (row checks, the
// grouping of repeated rows, argument checks) run everywhere; the kernels
// on device-resident packets are compared with ApplyOptimizerToRows and
// skip, saying why, when no CUDA device is present.
#include "kernels/cuda/device_optimizers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/gpu_kernels.h"
#include "tests/kernels/gpu_test_support.h"

namespace ps::kernels::gpu {
namespace {

TEST(DeviceOptimizersTest, CheckRowsNamesTheFirstBadIndex) {
  const std::vector<uint32_t> rows = {0, 9, 12, 10, 3};
  EXPECT_TRUE(CheckRows(rows, 13).ok());
  const Status bad = CheckRows(rows, 10);
  EXPECT_EQ(bad.code(), StatusCode::kOutOfRange);
  EXPECT_NE(bad.message().find("index 2 is row 12"), std::string::npos)
      << bad.ToString();
  EXPECT_TRUE(CheckRows({}, 0).ok());
}

TEST(DeviceOptimizersTest, DistinctRowsNeedNoGrouping) {
  std::vector<uint32_t> order = {7}, starts = {7};
  EXPECT_FALSE(GroupRows(std::vector<uint32_t>{5, 1, 9, 0}, &order, &starts));
  EXPECT_TRUE(order.empty());
  EXPECT_TRUE(starts.empty());
  EXPECT_FALSE(GroupRows({}, &order, &starts));
}

TEST(DeviceOptimizersTest, RepeatedRowsAreGroupedInPacketOrder) {
  const std::vector<uint32_t> rows = {4, 2, 4, 7, 2, 4};
  std::vector<uint32_t> order, starts;
  ASSERT_TRUE(GroupRows(rows, &order, &starts));
  // Row 2 at 1 and 4, row 4 at 0, 2 and 5, row 7 at 3.
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 4, 0, 2, 5, 3}));
  EXPECT_EQ(starts, (std::vector<uint32_t>{0, 2, 5, 6}));
}

TEST(DeviceOptimizersTest, GroupsCoverEveryEntryOnceWithOneRowEach) {
  std::mt19937 rng(5);
  std::vector<uint32_t> rows(5000);
  for (auto& r : rows) r = rng() % 700;
  std::vector<uint32_t> order, starts;
  ASSERT_TRUE(GroupRows(rows, &order, &starts));
  std::vector<uint32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint32_t> all(rows.size());
  std::iota(all.begin(), all.end(), 0u);
  EXPECT_EQ(sorted, all);
  ASSERT_EQ(starts.front(), 0u);
  ASSERT_EQ(starts.back(), rows.size());
  for (size_t g = 0; g + 1 < starts.size(); ++g) {
    ASSERT_LT(starts[g], starts[g + 1]);
    for (uint32_t k = starts[g] + 1; k < starts[g + 1]; ++k) {
      ASSERT_EQ(rows[order[k]], rows[order[starts[g]]]);
      ASSERT_LT(order[k - 1], order[k]);  // packet order within a row
    }
    if (g > 0) {
      ASSERT_NE(rows[order[starts[g]]], rows[order[starts[g - 1]]]);
    }
  }
}

TEST(DeviceOptimizersTest, ArgumentsAreCheckedBeforeAnyLaunch) {
  // These return before touching the device, so they run without one.
  DeviceTable t;
  float params = 0.0f, m = 0.0f, v = 0.0f;
  t.params = &params;
  t.state[0] = &m;
  t.state[1] = &v;
  t.num_rows = 1;
  t.dim = 1;
  EXPECT_EQ(LaunchOptimizerRows(AdamConfig{}, 0, t, nullptr, nullptr, 1,
                                nullptr, nullptr, 1, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  t.state[1] = nullptr;
  EXPECT_EQ(LaunchOptimizerRows(FtrlConfig{}, 1, t, nullptr, nullptr, 1,
                                nullptr, nullptr, 1, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  uint32_t order = 0;
  EXPECT_EQ(LaunchOptimizerRows(MomentumConfig{}, 1, t, nullptr, nullptr, 1,
                                &order, nullptr, 1, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(LaunchAddRows(t, nullptr, nullptr, 0, 1.0f, nullptr).ok());
}

using testing::Download;
using testing::Upload;

// Each optimizer on a device-resident packet (repeated rows grouped with
// GroupRows and uploaded) against the CPU's ApplyOptimizerToRows.
TEST(DeviceOptimizersTest, KernelsMatchTheCpuOnDeviceResidentPackets) {
  SKIP_WITHOUT_GPU();
  const std::vector<OptimizerConfig> configs = {
      SgdConfig{0.5f}, MomentumConfig{}, AdagradConfig{}, AdamConfig{},
      FtrlConfig{0.05f, 1.0f, 0.01f, 0.001f}};
  constexpr uint64_t kRows = 300;
  constexpr uint32_t kDim = 24;
  constexpr size_t kCount = 1000;
  for (const OptimizerConfig& config : configs) {
    SCOPED_TRACE(config.index());
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> params(kRows * kDim), state0(kRows * kDim, 0.1f),
        state1(kRows * kDim, 0.0f);
    for (float& p : params) p = normal(rng);
    std::vector<uint32_t> rows(kCount);
    for (auto& r : rows) r = rng() % kRows;
    std::vector<float> grads(kCount * kDim);
    for (float& g : grads) g = normal(rng);

    DeviceBuffer d_params = Upload(params), d_state0 = Upload(state0),
                 d_state1 = Upload(state1), d_rows = Upload(rows),
                 d_grads = Upload(grads);
    std::vector<uint32_t> order, starts;
    const bool grouped = GroupRows(rows, &order, &starts);
    ASSERT_TRUE(grouped);
    DeviceBuffer d_order = Upload(order), d_starts = Upload(starts);
    DeviceTable t;
    t.params = d_params.as<float>();
    t.state[0] = d_state0.as<float>();
    t.state[1] = d_state1.as<float>();
    t.num_rows = kRows;
    t.dim = kDim;
    const Status launched = LaunchOptimizerRows(
        config, 3, t, d_rows.as<uint32_t>(), d_grads.as<float>(), kCount,
        d_order.as<uint32_t>(), d_starts.as<uint32_t>(), starts.size() - 1,
        nullptr);
    ASSERT_TRUE(launched.ok()) << launched.ToString();

    OptimizerTable host;
    host.params = params.data();
    host.state[0] = state0.data();
    host.state[1] = state1.data();
    host.num_rows = kRows;
    host.dim = kDim;
    ASSERT_TRUE(ApplyOptimizerToRows(config, 3, host, rows, grads).ok());
    const std::vector<float> got = Download<float>(d_params, params.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], params[i],
                  1e-4f * std::max(1.0f, std::fabs(params[i])))
          << "at " << i;
    }
  }
}

}  // namespace
}  // namespace ps::kernels::gpu
