// Initializers: a row's starting values depend on (seed, row) only, so the
// same table starts identically however it is sharded.
#include "table/initializer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "protocol/table_config.h"
#include "server/shard.h"

namespace ps::server {
namespace {

using table::InitializeRow;
using table::InitializeRows;
using table::ValidateInitializer;

xfer::ContextOptions Named(const char* name) {
  xfer::ContextOptions o;
  o.name = name;
  return o;
}

proto::InitializerSpec Init(const char* name, float scale, uint64_t seed) {
  proto::InitializerSpec s;
  s.set_name(name);
  s.set_scale(scale);
  s.set_seed(seed);
  return s;
}

TEST(InitializerTest, SameSeedAndRowGiveSameValues) {
  for (const char* name : {"uniform", "normal"}) {
    std::vector<float> a(8), b(8), c(8);
    InitializeRow(Init(name, 0.1f, 42), 12345, a);
    InitializeRow(Init(name, 0.1f, 42), 12345, b);
    InitializeRow(Init(name, 0.1f, 43), 12345, c);
    EXPECT_EQ(a, b) << name;
    EXPECT_NE(a, c) << name;
    InitializeRow(Init(name, 0.1f, 42), 12346, c);
    EXPECT_NE(a, c) << name;
  }
}

TEST(InitializerTest, DistributionsHaveTheirScale) {
  const uint32_t dim = 4;
  const uint64_t rows = 50000;
  std::vector<float> u(rows * dim), n(rows * dim);
  InitializeRows(Init("uniform", 0.5f, 1), 0, rows, dim, u.data());
  InitializeRows(Init("normal", 2.0f, 1), 0, rows, dim, n.data());
  double umin = 1, umax = -1, usum = 0, nsum = 0, nsq = 0;
  for (float v : u) {
    umin = std::min<double>(umin, v);
    umax = std::max<double>(umax, v);
    usum += v;
  }
  for (float v : n) {
    nsum += v;
    nsq += double(v) * v;
  }
  EXPECT_GE(umin, -0.5);
  EXPECT_LE(umax, 0.5);
  EXPECT_LT(umin, -0.49);
  EXPECT_GT(umax, 0.49);
  EXPECT_NEAR(usum / u.size(), 0.0, 0.01);
  EXPECT_NEAR(nsum / n.size(), 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(nsq / n.size()), 2.0, 0.03);
}

TEST(InitializerTest, ZerosAndValidation) {
  std::vector<float> r(3, 7.0f);
  InitializeRow(Init("zeros", 1.0f, 1), 5, r);
  EXPECT_EQ(r, std::vector<float>(3, 0.0f));
  EXPECT_TRUE(ValidateInitializer(Init("uniform", 0.1f, 0)).ok());
  EXPECT_FALSE(ValidateInitializer(Init("xavier", 0.1f, 0)).ok());
  EXPECT_FALSE(ValidateInitializer(Init("uniform", -1.0f, 0)).ok());
  EXPECT_FALSE(ValidateInitializer(Init("normal", NAN, 0)).ok());
}

TEST(InitializerTest, ShardedTableStartsLikeTheWholeTable) {
  auto ctx = xfer::Context::Create(Named("init-test")).value();
  auto config = protocol::ParseTableConfig(R"(
    table { id: 1 name: "emb" kind: HASHED dim: 3 capacity: 1001
            initializer { name: "normal" scale: 0.01 seed: 9 } }
  )")
                    .value();
  auto whole = Shard::Create(ctx.get(), config, 0, 1).value();
  const auto* all =
      static_cast<const float*>(whole->Find(1)->rows_region()->data());
  for (uint32_t s = 0; s < 3; ++s) {
    auto part = Shard::Create(ctx.get(), config, s, 3).value();
    const TableShard* t = part->Find(1);
    ASSERT_GT(t->rows(), 0u);
    for (uint64_t r = 0; r < t->rows() * 3; ++r) {
      ASSERT_EQ(static_cast<const float*>(t->rows_region()->data())[r],
                all[t->first_row() * 3 + r])
          << "shard " << s;
    }
  }
}

TEST(InitializerTest, ShardRefusesBadLayouts) {
  auto ctx = xfer::Context::Create(Named("init-test")).value();
  auto config = protocol::ParseTableConfig(
                    "table { id: 1 name: \"t\" dim: 1 capacity: 2 }")
                    .value();
  EXPECT_TRUE(Shard::Create(ctx.get(), config, 0, 3)
                  .status()
                  .Is(StatusCode::kInvalidArgument));  // a shard with no rows
  EXPECT_TRUE(Shard::Create(ctx.get(), config, 2, 2)
                  .status()
                  .Is(StatusCode::kInvalidArgument));
  config.mutable_table(0)->mutable_initializer()->set_scale(-1);
  config.mutable_table(0)->mutable_initializer()->set_name("uniform");
  EXPECT_FALSE(Shard::Create(ctx.get(), config, 0, 1).ok());
}

}  // namespace
}  // namespace ps::server
