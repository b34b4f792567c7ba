// CsvSpec and CsvLayout: the spec's items and their errors, the header
// resolving the spec (missing and repeated columns, a BOM, another
// separator), and data lines becoming examples: categorical columns hashed
// per field, numeric ones log-bucketed, empty values missing, quoted fields,
// and each malformed line refused with what is wrong (nothing added).
#include "worker/data/csv_layout.h"

#include <gtest/gtest.h>

#include "worker/data/feature_hash.h"

namespace ps::data {
namespace {

CsvLayout Layout(std::string_view spec, std::string_view header) {
  auto s = CsvSpec::Parse(spec);
  EXPECT_TRUE(s.ok()) << s.status();
  auto layout = CsvLayout::FromHeader(*s, header);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return std::move(layout).value();
}

std::string SpecError(std::string_view spec) {
  auto s = CsvSpec::Parse(spec);
  EXPECT_FALSE(s.ok()) << spec;
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  return s.status().message();
}

std::string HeaderError(std::string_view spec, std::string_view header) {
  auto s = CsvSpec::Parse(spec);
  EXPECT_TRUE(s.ok()) << s.status();
  auto layout = CsvLayout::FromHeader(*s, header);
  EXPECT_FALSE(layout.ok()) << header;
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  return layout.status().message();
}

TEST(CsvSpecTest, ReadsEveryRole) {
  auto s = CsvSpec::Parse(
      "label=click  numeric=hour,price ignore=id categorical=a,b sep=tab");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->label, "click");
  EXPECT_EQ(s->numeric, (std::vector<std::string>{"hour", "price"}));
  EXPECT_EQ(s->ignore, (std::vector<std::string>{"id"}));
  EXPECT_EQ(s->categorical, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s->separator, '\t');
  EXPECT_EQ(CsvSpec::Parse("label=y sep=;")->separator, ';');
  EXPECT_EQ(CsvSpec::Parse("label=y")->separator, ',');
}

TEST(CsvSpecTest, RefusesWhatIsWrong) {
  EXPECT_NE(SpecError("ignore=id").find("no label column"), std::string::npos);
  EXPECT_NE(SpecError("").find("no label column"), std::string::npos);
  EXPECT_NE(SpecError("label=a label=b").find("label= twice"),
            std::string::npos);
  EXPECT_NE(SpecError("label=a colour=b").find("role 'colour'"),
            std::string::npos);
  EXPECT_NE(SpecError("label=a numeric").find("not role=NAMES"),
            std::string::npos);
  EXPECT_NE(SpecError("label=a sep=").find("not role=NAMES"),
            std::string::npos);
  EXPECT_NE(SpecError("label=a sep=ab").find("sep='ab'"), std::string::npos);
  EXPECT_NE(SpecError("label=a sep=, sep=;").find("twice"), std::string::npos);
}

TEST(CsvLayoutTest, FeatureColumnsAreFieldsInHeaderOrder) {
  CsvLayout l =
      Layout("label=click ignore=id numeric=hour", "id,click,hour,site,app");
  EXPECT_EQ(l.field_names(), (std::vector<std::string>{"hour", "site", "app"}));
  EXPECT_EQ(l.num_columns(), 5u);

  ExampleBatch b;
  ASSERT_TRUE(l.ParseLine("9f3a,1,14102100,s1,", &b).ok());
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b.labels[0], 1.0f);
  EXPECT_EQ(b.ids,
            (std::vector<uint64_t>{HashBucket(0, LogBucket(14102100)),
                                   HashFeature(1, "s1"), MissingFeature(2)}));
  EXPECT_EQ(b.fields, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(b.values, (std::vector<float>{1, 1, 1}));
  // The id column changes nothing; -1 is a non-click; 2.6 rounds to 3.
  ASSERT_TRUE(l.ParseLine("other,-1,2.6,s1,a", &b).ok());
  EXPECT_EQ(b.labels[1], 0.0f);
  EXPECT_EQ(b.ids[3], HashBucket(0, LogBucket(3)));
  EXPECT_EQ(b.ids[4], HashFeature(1, "s1"));
  EXPECT_EQ(b.ids[5], HashFeature(2, "a"));

  // Negative numbers are bucketed apart from positive ones, by magnitude.
  ExampleBatch negative;
  ASSERT_TRUE(l.ParseLine("x,+1,-1000,s1,a", &negative).ok());
  ASSERT_TRUE(l.ParseLine("x,1,-1010,s1,a", &negative).ok());
  EXPECT_EQ(negative.ids[0], negative.ids[3]);
  EXPECT_EQ(negative.ids[0], HashBucket(0, -1 - LogBucket(1000)));
  EXPECT_NE(negative.ids[0], HashBucket(0, LogBucket(1000)));
}

TEST(CsvLayoutTest, AnExplicitCategoricalListReadsPastTheRest) {
  CsvLayout l = Layout("label=y categorical=b", "a,y,b,c");
  EXPECT_EQ(l.field_names(), (std::vector<std::string>{"b"}));
  ExampleBatch b;
  ASSERT_TRUE(l.ParseLine("x,0,v,w", &b).ok());
  EXPECT_EQ(b.ids, (std::vector<uint64_t>{HashFeature(0, "v")}));
}

TEST(CsvLayoutTest, QuotedFieldsAByteOrderMarkAndOtherSeparators) {
  CsvLayout l = Layout("label=y", "\xEF\xBB\xBFy,\"na,me\"");
  EXPECT_EQ(l.field_names(), (std::vector<std::string>{"na,me"}));
  ExampleBatch b;
  ASSERT_TRUE(l.ParseLine("\"1\",\"a \"\"b\"\", c\"", &b).ok());
  EXPECT_EQ(b.ids, (std::vector<uint64_t>{HashFeature(0, "a \"b\", c")}));
  ASSERT_TRUE(l.ParseLine("0,\"\"", &b).ok());
  EXPECT_EQ(b.ids[1], MissingFeature(0));

  CsvLayout tsv = Layout("label=y sep=tab", "x\ty");
  ASSERT_TRUE(tsv.ParseLine("a,b\t1", &b).ok());
  EXPECT_EQ(b.ids[2], HashFeature(0, "a,b"));
}

TEST(CsvLayoutTest, HeaderErrorsNameTheColumn) {
  EXPECT_NE(HeaderError("label=click", "id,clicks,site")
                .find("label column 'click' is not in the header (id, "
                      "clicks, site)"),
            std::string::npos);
  EXPECT_NE(HeaderError("label=y ignore=z", "y,a").find("ignore column 'z'"),
            std::string::npos);
  EXPECT_NE(HeaderError("label=y numeric=a ignore=a", "y,a")
                .find("names column 'a' twice"),
            std::string::npos);
  EXPECT_NE(HeaderError("label=y", "y,a,a")
                .find("the header names column "
                      "'a' twice"),
            std::string::npos);
  EXPECT_NE(HeaderError("label=y ignore=a", "y,a").find("no feature column"),
            std::string::npos);
  EXPECT_NE(HeaderError("label=y", "y,\"a").find("not closed"),
            std::string::npos);
}

TEST(CsvLayoutTest, MalformedLinesSayWhatAndAddNothing) {
  CsvLayout l = Layout("label=click numeric=n", "click,n,c");
  ExampleBatch b;
  ASSERT_TRUE(l.ParseLine("1,5,x", &b).ok());
  const ExampleBatch before = b;
  auto error = [&](std::string_view line) {
    Status s = l.ParseLine(line, &b);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << line;
    EXPECT_EQ(b.ids, before.ids) << line;
    EXPECT_EQ(b.size(), before.size()) << line;
    return s.message();
  };
  EXPECT_EQ(error("1,5"), "has 2 columns, the header 3");
  EXPECT_EQ(error("1,5,x,y"), "has 4 columns, the header 3");
  EXPECT_EQ(error("yes,5,x"), "label click 'yes' is not 0/1 or -1/+1");
  EXPECT_EQ(error("2,5,x"), "label click '2' is not 0/1 or -1/+1");
  EXPECT_EQ(error("1,five,x"), "numeric column n 'five' is not a number");
  EXPECT_EQ(error("1,nan,x"), "numeric column n 'nan' is not a number");
  EXPECT_EQ(error("+-1,5,x"), "label click '+-1' is not 0/1 or -1/+1");
  EXPECT_EQ(error("1,+-5,x"), "numeric column n '+-5' is not a number");
  EXPECT_EQ(error("1,5,\"x"),
            "a quoted field is not closed on its line (a field across lines "
            "is not supported)");
  EXPECT_EQ(error("1,5,\"x\"y"), "text after the closing quote of field 3");
}

}  // namespace
}  // namespace ps::data
