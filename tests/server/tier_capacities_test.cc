// TierCapacities (ps_server --disk_tier_memory_mib): the tables with a disk
// tier keep their capacities while they fit the budget, are scaled down
// together in proportion when they do not, and a budget that leaves a
// table no row is a clear error. Other tables are never touched.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "server/shard.h"

namespace ps::server {
namespace {

proto::TableConfig Config() {
  proto::TableConfig c;
  // Rows of 16 floats + Adagrad's 16 (128 B) and of 8 floats, sgd (32 B).
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        table {
          id: 1
          name: "a"
          kind: EXACT
          dim: 16
          capacity: 1000
          admit_after_pushes: 1
          when_full: WHEN_FULL_MOVE_TO_DISK
          optimizer { kind: OPTIMIZER_ADAGRAD learning_rate: 0.1 }
        }
        table {
          id: 2
          name: "b"
          kind: EXACT
          dim: 8
          capacity: 2000
          admit_after_pushes: 1
          when_full: WHEN_FULL_MOVE_TO_DISK
          optimizer { kind: OPTIMIZER_SGD learning_rate: 0.1 }
        }
        table { id: 3 name: "c" kind: EXACT dim: 8 capacity: 5000 }
        table { id: 4 name: "d" kind: HASHED dim: 8 capacity: 100000 }
      )pb",
      &c));
  return c;
}

TEST(TierCapacitiesTest, TablesThatFitKeepTheirCapacities) {
  // 1000 x 128 + 2000 x 32 = 192,000 bytes.
  EXPECT_TRUE(TierCapacities(Config(), 0).value().empty());
  EXPECT_TRUE(TierCapacities(Config(), 192000).value().empty());
}

TEST(TierCapacitiesTest, TablesThatDoNotFitAreScaledDownTogether) {
  const auto half = TierCapacities(Config(), 96000).value();
  EXPECT_EQ(half, (std::map<uint32_t, uint64_t>{{1, 500}, {2, 1000}}));
}

TEST(TierCapacitiesTest, ABudgetThatLeavesATableNoRowIsAnError) {
  const auto none = TierCapacities(Config(), 100);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no row in memory"), std::string::npos)
      << none.status();
}

}  // namespace
}  // namespace ps::server
