// TableSpec.admit_after_examples: off by default, accepted on HASHED and
// EXACT tables up to kMaxAdmitAfterExamples, refused on DENSE tables and
// above the bound with a message that names the table and the field; and
// adaptive_admission: its reliability in [0, 1), not with
// admit_after_examples, not on DENSE tables. And an EXACT table's
// admit_after_pushes in [1, kMaxAdmitAfterPushes] (its server's sketch),
// and when_full, evict_after_steps and evict_after_seconds (at most
// kMaxEvictAfterSeconds) only on EXACT tables.
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

TEST(AdmissionSpecTest, AdmitAfterPushesIsBoundedByTheServersSketch) {
  auto exact = [](uint32_t n) {
    return ParseTableConfig(
        "table { id: 3 name: \"ids\" kind: EXACT dim: 2 capacity: 100 "
        "admit_after_pushes: " +
        std::to_string(n) + " }");
  };
  EXPECT_TRUE(exact(1).ok());
  EXPECT_TRUE(exact(kMaxAdmitAfterPushes).ok());
  for (uint32_t n : {0u, kMaxAdmitAfterPushes + 1}) {
    auto config = exact(n);
    ASSERT_FALSE(config.ok()) << n;
    EXPECT_EQ(config.status().message(),
              "table 'ids' (id 3): admit_after_pushes must be in [1, 65535], "
              "not " +
                  std::to_string(n));
  }
}

TEST(AdmissionSpecTest, WhenFullIsForExactTablesAndKnownValues) {
  auto with = [](const std::string& kind, const std::string& when) {
    return ParseTableConfig("table { id: 3 name: \"t\" kind: " + kind +
                            " dim: 2 capacity: 100 admit_after_pushes: 1 "
                            "when_full: " +
                            when + " }");
  };
  EXPECT_TRUE(with("EXACT", "WHEN_FULL_REFUSE").ok());
  auto hashed = with("HASHED", "WHEN_FULL_REFUSE");
  ASSERT_FALSE(hashed.ok());
  EXPECT_EQ(hashed.status().message(),
            "table 't' (id 3): when_full is for EXACT tables");
  auto unknown = with("EXACT", "7");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("when_full"), std::string::npos)
      << unknown.status().message();
}

TEST(AdmissionSpecTest, EvictionIsForExactTablesAndBounded) {
  auto with = [](const std::string& kind, const std::string& evict) {
    return ParseTableConfig("table { id: 3 name: \"t\" kind: " + kind +
                            " dim: 2 capacity: 100 admit_after_pushes: 1 " +
                            evict + " }");
  };
  EXPECT_TRUE(with("EXACT", "evict_after_seconds: 3600").ok());
  EXPECT_TRUE(
      with("EXACT", "evict_after_seconds: 1000000000 evict_after_steps: 5")
          .ok());
  for (const char* evict :
       {"evict_after_seconds: 60", "evict_after_steps: 5"}) {
    auto hashed = with("HASHED", evict);
    ASSERT_FALSE(hashed.ok()) << evict;
    EXPECT_EQ(hashed.status().message(),
              "table 't' (id 3): evict_after_steps and evict_after_seconds "
              "are for EXACT tables");
  }
  auto huge = with("EXACT", "evict_after_seconds: 1000000001");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("evict_after_seconds must be at most"),
            std::string::npos)
      << huge.status().message();
}

TEST(AdmissionSpecTest, RefusedOnDenseTables) {
  auto config = ParseTableConfig(Table("DENSE", "admit_after_examples: 2"));
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(config.status().Is(StatusCode::kInvalidArgument));
  EXPECT_NE(config.status().message().find(
                "table 'emb' (id 3): admit_after_examples and "
                "adaptive_admission are for HASHED and EXACT tables"),
            std::string::npos)
      << config.status().message();
  // Off is fine on a DENSE table.
  EXPECT_TRUE(ParseTableConfig(Table("DENSE", "")).ok());
}

TEST(AdmissionSpecTest, AdaptiveAdmission) {
  for (const char* spec :
       {"adaptive_admission { }", "adaptive_admission { reliability: 0.8 }"}) {
    auto config = ParseTableConfig(Table("HASHED", spec));
    ASSERT_TRUE(config.ok()) << spec << ": " << config.status().ToString();
    EXPECT_TRUE(config->table(0).has_adaptive_admission());
  }
  auto both = ParseTableConfig(
      Table("HASHED", "admit_after_examples: 5 adaptive_admission { }"));
  EXPECT_NE(both.status().message().find("exclude each other"),
            std::string::npos)
      << both.status().message();
  for (const char* r : {"1", "-0.5", "nan"}) {
    auto bad = ParseTableConfig(Table(
        "EXACT", std::string("adaptive_admission { reliability: ") + r + " }"));
    EXPECT_TRUE(bad.status().Is(StatusCode::kInvalidArgument)) << r;
    EXPECT_NE(bad.status().message().find(
                  "table 'emb' (id 3): adaptive_admission reliability must be "
                  "in [0, 1)"),
              std::string::npos)
        << bad.status().message();
  }
  auto dense = ParseTableConfig(Table("DENSE", "adaptive_admission { }"));
  EXPECT_NE(dense.status().message().find("are for HASHED and EXACT tables"),
            std::string::npos)
      << dense.status().message();
}

}  // namespace
}  // namespace ps::protocol
