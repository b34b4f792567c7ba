// TableSpec.admit_after_examples: off by default, accepted on HASHED and
// EXACT tables up to kMaxAdmitAfterExamples, refused on DENSE tables and
// above the bound with a message that names the table and the field.
#include <gtest/gtest.h>

#include <string>

#include "protocol/table_config.h"

namespace ps::protocol {
namespace {

std::string Table(const std::string& kind, const std::string& extra) {
  return "table { id: 3 name: \"emb\" kind: " + kind +
         " dim: 2 capacity: 100 admit_after_pushes: 1 " + extra + " }";
}

TEST(AdmissionSpecTest, OffByDefault) {
  auto config = ParseTableConfig(Table("HASHED", ""));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->table(0).admit_after_examples(), 0u);
}

TEST(AdmissionSpecTest, AcceptedOnHashedAndExactTables) {
  for (const char* kind : {"HASHED", "EXACT"}) {
    for (uint32_t n : {1u, 5u, kMaxAdmitAfterExamples}) {
      auto config = ParseTableConfig(
          Table(kind, "admit_after_examples: " + std::to_string(n)));
      ASSERT_TRUE(config.ok())
          << kind << " " << n << ": " << config.status().ToString();
      EXPECT_EQ(config->table(0).admit_after_examples(), n);
    }
  }
}

TEST(AdmissionSpecTest, AboveTheBoundIsRefusedNamingTheTable) {
  auto config = ParseTableConfig(Table(
      "HASHED",
      "admit_after_examples: " + std::to_string(kMaxAdmitAfterExamples + 1)));
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(config.status().Is(StatusCode::kInvalidArgument));
  EXPECT_EQ(config.status().message(),
            "table 'emb' (id 3): admit_after_examples must be in [0, 65535] "
            "(0: off), not 65536");
}

TEST(AdmissionSpecTest, RefusedOnDenseTables) {
  auto config = ParseTableConfig(Table("DENSE", "admit_after_examples: 2"));
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(config.status().Is(StatusCode::kInvalidArgument));
  EXPECT_NE(config.status().message().find(
                "table 'emb' (id 3): admit_after_examples is for HASHED and "
                "EXACT tables"),
            std::string::npos)
      << config.status().message();
  // Off is fine on a DENSE table.
  EXPECT_TRUE(ParseTableConfig(Table("DENSE", "")).ok());
}

}  // namespace
}  // namespace ps::protocol
