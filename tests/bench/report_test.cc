// The benchmark report writer: medians of samples, ratios both ways, nulls
// for what is missing, the JSON schema the scripts promise, and the JSON
// readers for Google Benchmark and single numbers.
#include "bench/report/report.h"

#include <gtest/gtest.h>

#include "bench/report/json_input.h"

namespace ps::bench {
namespace {

TEST(ReportTest, RowsResolveSamplesMediansAndRatios) {
  Report r;
  ASSERT_TRUE(r.Add("ours_bw 3 GB/s\nours_bw 1\nours_bw 2\n"
                    "peer_bw 4 GB/s\nours_lat 2 us\npeer_lat 1\n"
                    "row bw GB/s ours_bw peer_bw higher ucx (shm)\n"
                    "row lat us ours_lat peer_lat lower -\n"
                    "row scaled GB/s ours_bw*1e-3 8 - some peer\n"
                    "extra missing ms nothing_here - -\n")
                  .ok());
  auto f = r.Figures();
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].value, 2.0);  // median of 3, 1, 2
  EXPECT_EQ(f[0].peer, "ucx (shm)");
  EXPECT_EQ(f[0].ratio, 0.5);  // ours / peer
  EXPECT_EQ(f[1].ratio, 0.5);  // peer / ours
  EXPECT_FALSE(f[1].peer.has_value());
  EXPECT_DOUBLE_EQ(*f[2].value, 0.002);
  EXPECT_EQ(f[2].peer_value, 8.0);
  EXPECT_FALSE(f[2].ratio.has_value());
  EXPECT_FALSE(f[3].value.has_value());
  EXPECT_FALSE(f[3].in_json);

  EXPECT_EQ(
      r.Json(),
      "{\n  \"results\": [\n"
      "    {\"name\": \"bw\", \"value\": 2, \"unit\": \"GB/s\", \"peer\": "
      "\"ucx (shm)\", \"peer_value\": 4, \"ratio\": 0.5},\n"
      "    {\"name\": \"lat\", \"value\": 2, \"unit\": \"us\", \"peer\": "
      "null, \"peer_value\": 1, \"ratio\": 0.5},\n"
      "    {\"name\": \"scaled\", \"value\": 0.002, \"unit\": \"GB/s\", "
      "\"peer\": \"some peer\", \"peer_value\": 8, \"ratio\": null}\n"
      "  ]\n}\n");
  std::string table = r.Table();
  EXPECT_NE(table.find("missing"), std::string::npos) << table;
  EXPECT_NE(table.find("ucx (shm)"), std::string::npos) << table;
}

TEST(ReportTest, BadLinesAreNamed) {
  Report r;
  Status s = r.Add("a 1\nb one\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  EXPECT_FALSE(Report().Add("row x GB/s a b sideways\n").ok());
  EXPECT_FALSE(Report().Add("row x GB/s a\n").ok());
}

TEST(JsonInputTest, NumbersAndGbenchMedians) {
  EXPECT_EQ(
      JsonNumber(R"({"end": {"sum": {"bps": 8e9}}})", "end.sum.bps").value(),
      8e9);
  EXPECT_FALSE(JsonNumber(R"({"a": 1})", "b").ok());
  EXPECT_FALSE(JsonNumber("not json", "a").ok());
  auto lines = GbenchMedians(R"({"benchmarks": [
    {"run_name": "BM_X/1", "aggregate_name": "mean", "cpu_time": 9},
    {"run_name": "BM_X/1", "aggregate_name": "median", "cpu_time": 2000,
     "time_unit": "us", "bytes_per_second": 5}]})");
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  EXPECT_NE(lines->find("BM_X/1:cpu_ms 2\n"), std::string::npos) << *lines;
  EXPECT_NE(lines->find("BM_X/1:bytes_per_second 5\n"), std::string::npos);
  EXPECT_EQ(lines->find("9"), std::string::npos) << "only medians";
  // Run once: no aggregates, the run itself counts.
  lines = GbenchMedians(R"({"benchmarks": [{"run_name": "BM_Y",
    "run_type": "iteration", "cpu_time": 3, "time_unit": "ms"}]})");
  ASSERT_TRUE(lines.ok());
  EXPECT_EQ(*lines, "BM_Y:cpu_time 3\nBM_Y:cpu_ms 3\n");
}

}  // namespace
}  // namespace ps::bench
