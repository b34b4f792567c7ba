#include "worker/data/line_parsers.h"

#include <gtest/gtest.h>

#include <string>

#include "worker/data/feature_hash.h"

namespace ps::data {
namespace {

// A full Criteo line: label, 13 integers, 26 categories.
std::string CriteoLine(const std::string& label = "1") {
  // Appends, not operator+ on temporaries: GCC 12 at -O3 reports a false
  // -Wstringop-overflow inside the inlined concatenation.
  std::string line = label;
  for (int i = 0; i < 13; ++i)
    line.append("\t").append(std::to_string(i * 7 - 2));
  for (int i = 0; i < 26; ++i) {
    line.append("\t").append(std::to_string(1000 + i)).append("abcd");
  }
  return line;
}

TEST(CriteoParserTest, EveryColumnBecomesOneFeatureOfItsField) {
  ExampleBatch b;
  ASSERT_TRUE(ParseCriteoLine(CriteoLine(), &b).ok());
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b.labels[0], 1.0f);
  ASSERT_EQ(b.ids.size(), 39u);
  for (uint32_t f = 0; f < 39; ++f) {
    EXPECT_EQ(b.fields[f], f);
    EXPECT_EQ(b.values[f], 1.0f);
  }
  // I1 = -2 keeps its own bucket; I13 = 82 is log-bucketed.
  EXPECT_EQ(b.ids[0], HashBucket(0, -2));
  EXPECT_EQ(b.ids[12], HashBucket(12, LogBucket(82)));
  EXPECT_EQ(b.ids[13], HashFeature(13, "1000abcd"));
  EXPECT_EQ(b.ids[38], HashFeature(38, "1025abcd"));
}

TEST(CriteoParserTest, EmptyColumnsAreMissingValues) {
  std::string line = "0";
  for (int i = 0; i < 39; ++i) line += "\t";
  ExampleBatch b;
  ASSERT_TRUE(ParseCriteoLine(line, &b).ok());
  EXPECT_EQ(b.labels[0], 0.0f);
  ASSERT_EQ(b.ids.size(), 39u);
  for (uint32_t f = 0; f < 39; ++f) EXPECT_EQ(b.ids[f], MissingFeature(f));
}

TEST(CriteoParserTest, MalformedLinesAreRejectedAndLeaveNothing) {
  const std::string good = CriteoLine();
  std::string short_line = good.substr(0, good.rfind('\t'));
  std::string bad_int = CriteoLine();
  bad_int.replace(bad_int.find("\t5\t"), 3, "\tx5\t");
  for (const std::string& line :
       {short_line, std::string(good).append("\textra"), bad_int,
        std::string("2").append(good, 1), std::string(""), std::string("1")}) {
    ExampleBatch b;
    ASSERT_TRUE(ParseCriteoLine(good, &b).ok());
    Status s = ParseCriteoLine(line, &b);
    EXPECT_TRUE(s.Is(StatusCode::kInvalidArgument)) << line;
    EXPECT_FALSE(s.message().empty());
    EXPECT_EQ(b.size(), 1u);
    EXPECT_EQ(b.ids.size(), 39u);
    EXPECT_EQ(b.offsets.back(), 39u);
  }
}

TEST(LibsvmParserTest, ParsesLabelsAndFeatures) {
  ExampleBatch b;
  ASSERT_TRUE(ParseLibsvmLine("+1 3:0.5 17:2", &b).ok());
  ASSERT_TRUE(ParseLibsvmLine("-1 4:1", &b).ok());
  ASSERT_TRUE(ParseLibsvmLine("0", &b).ok());
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.labels[0], 1.0f);
  EXPECT_EQ(b.labels[1], 0.0f);
  EXPECT_EQ(b.ids[0], HashFeature(0, "3"));
  EXPECT_EQ(b.values[1], 2.0f);
  EXPECT_EQ(b.offsets, (std::vector<uint32_t>{0, 2, 3, 3}));
  EXPECT_FALSE(ParseLibsvmLine("1 3", &b).ok());
  EXPECT_FALSE(ParseLibsvmLine("1 3:abc", &b).ok());
  EXPECT_FALSE(ParseLibsvmLine("7 3:1", &b).ok());
  EXPECT_EQ(b.size(), 3u);
}

TEST(LibffmParserTest, ParsesFields) {
  ExampleBatch b;
  ASSERT_TRUE(ParseLibffmLine("1 2:10:1 5:11:0.25", &b).ok());
  EXPECT_EQ(b.fields, (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(b.ids[1], HashFeature(5, "11"));
  EXPECT_EQ(b.values[1], 0.25f);
  EXPECT_FALSE(ParseLibffmLine("1 x:10:1", &b).ok());
  EXPECT_FALSE(ParseLibffmLine("1 10:1", &b).ok());
}

TEST(LabelTest, EveryParserTakesTheSameLabels) {
  ExampleBatch b;
  for (const char* good : {"1 3:1", "+1 3:1", "-1 3:1", "0 3:1", "1.0 3:1"}) {
    EXPECT_TRUE(ParseLibsvmLine(good, &b).ok()) << good;
  }
  for (const char* bad : {"+-1 3:1", "2 3:1", "inf 3:1", "yes 3:1"}) {
    EXPECT_TRUE(ParseLibsvmLine(bad, &b).Is(StatusCode::kInvalidArgument))
        << bad;
  }
}

TEST(DataFormatTest, Names) {
  DataFormat f;
  EXPECT_TRUE(ParseDataFormat("libffm", &f).ok());
  EXPECT_EQ(f, DataFormat::kLibffm);
  EXPECT_TRUE(ParseDataFormat("csv", &f).ok());
  EXPECT_EQ(f, DataFormat::kCsv);
  EXPECT_TRUE(ParseDataFormat("tsv", &f).Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(ParseLine(DataFormat::kCsv, "1,a", nullptr)
                  .Is(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace ps::data
