// DeviceParamTable against the host ParamTable: the same starting rows,
// exactly the same sums for "sum"/"sgd" with integer gradients, the same
// optimizer results to float rounding (repeated rows included), a bad row
// refused with the table untouched, exact totals when many host threads
// add at once, checkpoint copies both ways, and rows in memory the caller
// owns (CreateWithRows) behaving like the table's own. Every test that needs
// a GPU skips, saying why, when none is usable; the test that runs here
// checks that Create then says kNotSupported with the reason.
#include "table/device_param_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "protocol/table_config.h"
#include "table/param_table.h"
#include "tests/table/skip_without_gpu.h"

namespace ps::table {
namespace {

proto::TableSpec Spec(const std::string& text) {
  auto config = protocol::ParseTableConfig(text);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config->table(0);
}

// A table of `dim` with optimizer block `optimizer` ("" for sum) and a
// uniform initializer, so rows do not start at zero.
proto::TableSpec TableWith(const std::string& optimizer, uint32_t dim) {
  return Spec("table { id: 1 name: \"t\" dim: " + std::to_string(dim) +
              " capacity: 1000 initializer { name: \"uniform\" scale: 0.5 "
              "seed: 7 } " +
              optimizer + " }");
}

struct Packet {
  std::vector<uint32_t> rows;
  std::vector<float> grads;
};

// `count` rows drawn from [0, num_rows) (so some repeat) with gradients
// that are small integers (integer == true: every sum is exact in float,
// whatever the order) or normal floats.
Packet RandomPacket(std::mt19937& rng, size_t count, uint64_t num_rows,
                    uint32_t dim, bool integer) {
  Packet p;
  std::uniform_int_distribution<uint32_t> row(
      0, static_cast<uint32_t>(num_rows - 1));
  std::uniform_int_distribution<int> small(-8, 8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < count; ++i) p.rows.push_back(row(rng));
  for (size_t i = 0; i < count * dim; ++i) {
    p.grads.push_back(integer ? static_cast<float>(small(rng)) : normal(rng));
  }
  return p;
}

struct Snapshot {
  std::vector<float> values;
  std::vector<float> state[kernels::kMaxOptimizerStates];
  uint64_t steps = 0;
};

Snapshot Copy(const DeviceParamTable& t) {
  Snapshot s;
  const Status status = t.CopyTo(&s.values, s.state, &s.steps);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return s;
}

Snapshot Copy(const ParamTable& t) {
  Snapshot s;
  t.CopyTo(&s.values, s.state, &s.steps);
  return s;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const float tolerance = 1e-5f * std::max(1.0f, std::fabs(want[i]));
    ASSERT_NEAR(got[i], want[i], tolerance) << what << " at " << i;
  }
}

// Applies `p` to both tables (the host one exclusively; its grads are
// scratch, so it gets a copy).
void ApplyBoth(ParamTable& host, DeviceParamTable& device, const Packet& p) {
  std::vector<float> scratch = p.grads;
  ASSERT_TRUE(
      host.Apply(p.rows, scratch, kernels::AccumulateMode::kExclusive).ok());
  const Status status = device.Apply(p.rows, p.grads);
  ASSERT_TRUE(status.ok()) << status.ToString();
}

TEST(DeviceParamTableTest, WithoutADeviceCreateIsNotSupportedWithTheReason) {
  const Status available = DeviceParamTable::Available();
  if (available.ok()) GTEST_SKIP() << "a CUDA device is usable here";
  auto t = DeviceParamTable::Create(TableWith("", 4), 0, 10);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotSupported);
  EXPECT_FALSE(t.status().message().empty());
  EXPECT_EQ(t.status().message(), available.message());
  std::printf("DeviceParamTable::Create: %s\n", t.status().ToString().c_str());
}

TEST(DeviceParamTableTest, AMissingDeviceOrdinalIsInvalidArgument) {
  SKIP_WITHOUT_GPU();
  auto t = DeviceParamTable::Create(TableWith("", 4), 0, 10, 1000);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument)
      << t.status().ToString();
}

TEST(DeviceParamTableTest, RowsMemoryOfTheWrongSizeIsInvalidArgument) {
  // Checked before the device, so this runs with and without CUDA.
  std::vector<float> too_small(10 * 4 - 1);
  auto t =
      DeviceParamTable::CreateWithRows(TableWith("", 4), 0, 10, 0, too_small);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument)
      << t.status().ToString();
  EXPECT_NE(t.status().message().find("need 40"), std::string::npos)
      << t.status().ToString();
}

TEST(DeviceParamTableTest, HostMemoryForTheRowsIsInvalidArgument) {
  SKIP_WITHOUT_GPU();
  std::vector<float> host(10 * 4);
  auto t = DeviceParamTable::CreateWithRows(TableWith("", 4), 0, 10, 0, host);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument)
      << t.status().ToString();
}

// Rows in the caller's device memory (here another table's, which outlives
// the borrower): they start, apply and checkpoint as the table's own do,
// and the borrower leaves the memory to its owner when it goes.
TEST(DeviceParamTableTest, RowsInTheCallersMemoryBehaveLikeOwnRows) {
  SKIP_WITHOUT_GPU();
  const proto::TableSpec spec = TableWith(
      "optimizer { name: \"adagrad\" learning_rate: 0.1 "
      "initial_accumulator: 0.25 }",
      5);
  auto owner = DeviceParamTable::Create(TableWith("", 5), 0, 300).value();
  auto host = ParamTable::Create(spec, 40, 300).value();
  {
    auto device =
        DeviceParamTable::CreateWithRows(
            spec, 40, 300, 0, std::span<float>(owner->data(), 300 * 5))
            .value();
    EXPECT_EQ(device->data(), owner->data());
    EXPECT_EQ(device->bytes(), host->bytes());
    EXPECT_EQ(Copy(*device).values, Copy(*host).values);
    std::mt19937 rng(5);
    for (int step = 0; step < 4; ++step) {
      ApplyBoth(*host, *device, RandomPacket(rng, 64, 300, 5, false));
    }
    const Snapshot d = Copy(*device), h = Copy(*host);
    ExpectNear(d.values, h.values, "values");
    ExpectNear(d.state[0], h.state[0], "state");
    EXPECT_EQ(d.steps, 4u);
    // A checkpoint round trip through the borrowed rows.
    ASSERT_TRUE(device->RestoreFrom(h.values, h.state, h.steps).ok());
    EXPECT_EQ(Copy(*device).values, h.values);
  }
  // The borrower is gone; the owner's memory (holding its last rows) is
  // still there to read.
  EXPECT_EQ(Copy(*owner).values, Copy(*host).values);
}

TEST(DeviceParamTableTest, RowsAndStateStartLikeTheHostTable) {
  SKIP_WITHOUT_GPU();
  const proto::TableSpec spec = TableWith(
      "optimizer { name: \"adagrad\" learning_rate: 0.1 "
      "initial_accumulator: 0.25 }",
      5);
  auto device = DeviceParamTable::Create(spec, 40, 300).value();
  auto host = ParamTable::Create(spec, 40, 300).value();
  EXPECT_EQ(device->dim(), 5u);
  EXPECT_EQ(device->first_row(), 40u);
  EXPECT_EQ(device->num_rows(), 300u);
  EXPECT_EQ(device->state_arrays(), 1);
  EXPECT_EQ(device->bytes(), host->bytes());
  EXPECT_NE(device->data(), nullptr);
  const Snapshot d = Copy(*device);
  const Snapshot h = Copy(*host);
  EXPECT_EQ(d.values, h.values);
  EXPECT_EQ(d.state[0], h.state[0]);
  EXPECT_EQ(d.steps, 0u);
}

TEST(DeviceParamTableTest, SumAndSgdAgreeExactlyWithIntegerGradients) {
  SKIP_WITHOUT_GPU();
  for (const std::string optimizer :
       {"", "optimizer { name: \"sum\" }",
        "optimizer { name: \"sgd\" learning_rate: 0.5 }"}) {
    SCOPED_TRACE(optimizer);
    for (uint32_t dim : {1u, 3u, 16u, 33u, 128u}) {
      SCOPED_TRACE(dim);
      // Zero rows: with the uniform start the sums would round.
      const proto::TableSpec spec =
          Spec("table { id: 1 name: \"t\" dim: " + std::to_string(dim) +
               " capacity: 1000 " + optimizer + " }");
      auto device = DeviceParamTable::Create(spec, 0, 200).value();
      auto host = ParamTable::Create(spec, 0, 200).value();
      std::mt19937 rng(dim);
      for (int packet = 0; packet < 5; ++packet) {
        ApplyBoth(*host, *device, RandomPacket(rng, 500, 200, dim, true));
      }
      EXPECT_EQ(Copy(*device).values, Copy(*host).values);
    }
  }
}

TEST(DeviceParamTableTest, OptimizersAgreeWithTheHostToFloatRounding) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::string> optimizers = {
      "optimizer { name: \"momentum\" learning_rate: 0.05 momentum: 0.9 }",
      "optimizer { name: \"adagrad\" learning_rate: 0.1 epsilon: 1e-6 "
      "initial_accumulator: 0.1 }",
      "optimizer { name: \"adam\" learning_rate: 0.01 beta1: 0.9 beta2: "
      "0.999 epsilon: 1e-8 }",
      "optimizer { name: \"ftrl\" ftrl_alpha: 0.05 ftrl_beta: 1 ftrl_l1: 0.01 "
      "ftrl_l2: 0.001 }",
  };
  for (const std::string& optimizer : optimizers) {
    SCOPED_TRACE(optimizer);
    for (uint32_t dim : {1u, 7u, 32u, 64u}) {
      SCOPED_TRACE(dim);
      const proto::TableSpec spec = TableWith(optimizer, dim);
      auto device = DeviceParamTable::Create(spec, 100, 64).value();
      auto host = ParamTable::Create(spec, 100, 64).value();
      std::mt19937 rng(dim + 1);
      // 64 rows and 200 entries a packet: every packet repeats rows.
      for (int packet = 0; packet < 6; ++packet) {
        ApplyBoth(*host, *device, RandomPacket(rng, 200, 64, dim, false));
      }
      const Snapshot d = Copy(*device);
      const Snapshot h = Copy(*host);
      EXPECT_EQ(d.steps, h.steps);
      EXPECT_EQ(d.steps, 6u);
      ExpectNear(d.values, h.values, "values");
      for (int k = 0; k < device->state_arrays(); ++k) {
        ExpectNear(d.state[k], h.state[k], "state " + std::to_string(k));
      }
    }
  }
}

TEST(DeviceParamTableTest, RepeatedRowsOfAPacketApplyInPacketOrder) {
  SKIP_WITHOUT_GPU();
  // FTRL with L1 is far from linear: the order of a row's steps shows.
  const proto::TableSpec spec = TableWith(
      "optimizer { name: \"ftrl\" ftrl_alpha: 0.5 ftrl_beta: 1 ftrl_l1: 0.3 "
      "}",
      2);
  auto device = DeviceParamTable::Create(spec, 0, 4).value();
  auto host = ParamTable::Create(spec, 0, 4).value();
  Packet p;
  p.rows = {3, 1, 3, 0, 3, 1};
  p.grads = {2.0f, -1.0f, 0.5f,   0.5f, -3.0f, 4.0f,
             1.0f, 1.0f,  -0.25f, 2.0f, -1.0f, -2.0f};
  ApplyBoth(*host, *device, p);
  const Snapshot d = Copy(*device);
  const Snapshot h = Copy(*host);
  ExpectNear(d.values, h.values, "values");
  ExpectNear(d.state[0], h.state[0], "z");
  ExpectNear(d.state[1], h.state[1], "n");
}

TEST(DeviceParamTableTest, ABadRowIsOutOfRangeAndChangesNothing) {
  SKIP_WITHOUT_GPU();
  for (const std::string optimizer :
       {"", "optimizer { name: \"adam\" learning_rate: 0.01 }"}) {
    SCOPED_TRACE(optimizer);
    auto t = DeviceParamTable::Create(TableWith(optimizer, 4), 0, 10).value();
    const Snapshot before = Copy(*t);
    const std::vector<uint32_t> rows = {1, 2, 10, 3};
    const std::vector<float> grads(rows.size() * 4, 1.0f);
    const Status status = t->Apply(rows, grads);
    EXPECT_EQ(status.code(), StatusCode::kOutOfRange) << status.ToString();
    EXPECT_NE(status.message().find("index 2 is row 10"), std::string::npos)
        << status.ToString();
    const Snapshot after = Copy(*t);
    EXPECT_EQ(after.values, before.values);
    EXPECT_EQ(after.state[0], before.state[0]);
    EXPECT_EQ(after.state[1], before.state[1]);
    EXPECT_EQ(after.steps, before.steps);

    const std::vector<float> short_grads(3, 1.0f);
    EXPECT_EQ(t->Apply(std::vector<uint32_t>{1}, short_grads).code(),
              StatusCode::kInvalidArgument);
  }
}

TEST(DeviceParamTableTest, ManyHostThreadsAddingToASumTableLoseNothing) {
  SKIP_WITHOUT_GPU();
  constexpr uint32_t kDim = 16;
  constexpr uint64_t kRows = 64;  // few rows: the senders collide constantly
  constexpr int kThreads = 8;
  constexpr int kPackets = 40;
  const proto::TableSpec spec =
      Spec("table { id: 1 name: \"t\" dim: 16 capacity: 1000 }");
  auto device = DeviceParamTable::Create(spec, 0, kRows).value();
  std::vector<std::vector<Packet>> packets(kThreads);
  std::vector<double> want(kRows * kDim, 0.0);
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937 rng(100 + t);
    for (int k = 0; k < kPackets; ++k) {
      packets[t].push_back(RandomPacket(rng, 1000, kRows, kDim, true));
      const Packet& p = packets[t].back();
      for (size_t i = 0; i < p.rows.size(); ++i) {
        for (uint32_t j = 0; j < kDim; ++j) {
          want[p.rows[i] * kDim + j] += p.grads[i * kDim + j];
        }
      }
    }
  }
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (const Packet& p : packets[t]) {
        const Status s = device->Apply(p.rows, p.grads);
        if (!s.ok()) {
          results[t] = s;
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.ToString();
  const Snapshot got = Copy(*device);
  ASSERT_EQ(got.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    // Integers far below 2^24: every partial sum is exact in float.
    ASSERT_EQ(got.values[i], static_cast<float>(want[i])) << "at " << i;
  }
}

TEST(DeviceParamTableTest, RestoreFromAHostCopyContinuesLikeTheHost) {
  SKIP_WITHOUT_GPU();
  const proto::TableSpec spec = TableWith(
      "optimizer { name: \"adam\" learning_rate: 0.01 beta1: 0.9 beta2: "
      "0.999 epsilon: 1e-8 }",
      8);
  auto host = ParamTable::Create(spec, 0, 50).value();
  std::mt19937 rng(3);
  for (int k = 0; k < 3; ++k) {
    Packet p = RandomPacket(rng, 40, 50, 8, false);
    ASSERT_TRUE(
        host->Apply(p.rows, p.grads, kernels::AccumulateMode::kExclusive).ok());
  }
  const Snapshot saved = Copy(*host);
  auto device = DeviceParamTable::Create(spec, 0, 50).value();
  ASSERT_TRUE(device->RestoreFrom(saved.values, saved.state, saved.steps).ok());
  EXPECT_EQ(device->optimizer_steps(), 3u);
  ApplyBoth(*host, *device, RandomPacket(rng, 40, 50, 8, false));
  const Snapshot d = Copy(*device);
  const Snapshot h = Copy(*host);
  EXPECT_EQ(d.steps, 4u);
  ExpectNear(d.values, h.values, "values");
  ExpectNear(d.state[0], h.state[0], "m");
  ExpectNear(d.state[1], h.state[1], "v");

  const std::vector<float> too_few(10, 0.0f);
  EXPECT_EQ(device->RestoreFrom(too_few, saved.state, 0).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps::table
