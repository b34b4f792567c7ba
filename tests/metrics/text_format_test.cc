// The Prometheus text format of a small registry, byte for byte: HELP and
// TYPE lines, label escaping, histogram buckets (cumulative, +Inf, _sum,
// _count), collector samples grouped by name; and the registry's refusals.
#include "metrics/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "metrics/process_collector.h"
#include "metrics/registry.h"

namespace ps::metrics {
namespace {

TEST(TextFormat, SmallRegistryExactly) {
  Registry r;
  Counter* c = r.AddCounter("ps_rows_total", "Rows applied.",
                            {{"shard", "0"}, {"table", "emb"}})
                   .value();
  c->Increment(41);
  c->Increment();
  r.AddCounter("ps_rows_total", "Rows applied.",
               {{"shard", "1"}, {"table", "emb"}})
      .value()
      ->Increment(7);
  r.AddGauge("ps_temperature_celsius", "A gauge.").value()->Set(-2.5);
  Histogram* h = r.AddHistogram("ps_push_seconds", "Push latency.",
                                {0.25, 1, 4}, {{"worker", "worker-0"}})
                     .value();
  h->Observe(0.125);
  h->Observe(0.5);
  h->Observe(0.5);
  h->Observe(8);
  r.AddCollector([](CollectorSink& sink) {
    sink.Gauge("ps_inbox_packets", "Waiting packets.", {{"worker", "a"}}, 3);
    sink.Counter("ps_applied_total", "From a collector.", {}, 5);
    sink.Gauge("ps_inbox_packets", "ignored help", {{"worker", "b"}}, 0);
  });
  const std::string want =
      "# HELP ps_rows_total Rows applied.\n"
      "# TYPE ps_rows_total counter\n"
      "ps_rows_total{shard=\"0\",table=\"emb\"} 42\n"
      "ps_rows_total{shard=\"1\",table=\"emb\"} 7\n"
      "# HELP ps_temperature_celsius A gauge.\n"
      "# TYPE ps_temperature_celsius gauge\n"
      "ps_temperature_celsius -2.5\n"
      "# HELP ps_push_seconds Push latency.\n"
      "# TYPE ps_push_seconds histogram\n"
      "ps_push_seconds_bucket{worker=\"worker-0\",le=\"0.25\"} 1\n"
      "ps_push_seconds_bucket{worker=\"worker-0\",le=\"1\"} 3\n"
      "ps_push_seconds_bucket{worker=\"worker-0\",le=\"4\"} 3\n"
      "ps_push_seconds_bucket{worker=\"worker-0\",le=\"+Inf\"} 4\n"
      "ps_push_seconds_sum{worker=\"worker-0\"} 9.125\n"
      "ps_push_seconds_count{worker=\"worker-0\"} 4\n"
      "# HELP ps_inbox_packets Waiting packets.\n"
      "# TYPE ps_inbox_packets gauge\n"
      "ps_inbox_packets{worker=\"a\"} 3\n"
      "ps_inbox_packets{worker=\"b\"} 0\n"
      "# HELP ps_applied_total From a collector.\n"
      "# TYPE ps_applied_total counter\n"
      "ps_applied_total 5\n";
  EXPECT_EQ(RenderText(r.Snapshot()), want);
}

TEST(TextFormat, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain \xc3\xa9"), "plain \xc3\xa9");
  EXPECT_EQ(EscapeHelp("two\nlines \\ and \"quotes\""),
            "two\\nlines \\\\ and \"quotes\"");
  Registry r;
  r.AddGauge("g", "Help with a\nnewline.", {{"path", "C:\\tmp\\\"x\""}})
      .value()
      ->Set(1);
  EXPECT_EQ(RenderText(r.Snapshot()),
            "# HELP g Help with a\\nnewline.\n"
            "# TYPE g gauge\n"
            "g{path=\"C:\\\\tmp\\\\\\\"x\\\"\"} 1\n");
}

TEST(TextFormat, Values) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(12345678901234.0), "12345678901234");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e-7), "1e-07");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(Registry, RefusesBadNamesAndTypeClashes) {
  Registry r;
  EXPECT_FALSE(r.AddCounter("9lives", "x").ok());
  EXPECT_FALSE(r.AddCounter("has-dash", "x").ok());
  EXPECT_FALSE(r.AddCounter("ok_total", "x", {{"__reserved", "v"}}).ok());
  EXPECT_FALSE(r.AddCounter("ok_total", "x", {{"a:b", "v"}}).ok());
  ASSERT_TRUE(r.AddCounter("ok_total", "x").ok());
  EXPECT_FALSE(r.AddGauge("ok_total", "x").ok());
  EXPECT_EQ(*r.AddCounter("ok_total", "x"), *r.AddCounter("ok_total", "x"));
  EXPECT_FALSE(r.AddHistogram("h_seconds", "x", {1, 1}).ok());
  ASSERT_TRUE(r.AddHistogram("h_seconds", "x", {1, 2}).ok());
  EXPECT_FALSE(r.AddHistogram("h_seconds", "x", {1, 3}).ok());
}

TEST(Registry, HistogramBoundsAreInclusive) {
  Histogram h({1, 2});
  h.Observe(1);
  h.Observe(2);
  h.Observe(2.5);
  HistogramSample s = h.Snapshot({});
  EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(s.count, 3u);
  EXPECT_DOUBLE_EQ(s.sum, 5.5);
}

TEST(ProcessCollector, ReportsCpuAndRss) {
  Registry r;
  AddProcessCollector(&r);
  const std::string text = RenderText(r.Snapshot());
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"),
            std::string::npos)
      << text;
  const size_t rss = text.find("\nprocess_resident_memory_bytes ");
  ASSERT_NE(rss, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(rss + 31)), 1e6) << text;
}

}  // namespace
}  // namespace ps::metrics
