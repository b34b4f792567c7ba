// The Avazu layout writes what it says: the 24-column header, rows of 24
// unquoted comma-separated values (a unique id, click 0/1, hour YYMMDDHH over
// 10 days, 8-hex-digit site/app/device ids, small integers), distinct values
// per column within the real log's counts and long-tailed where it is,
// about 17% clicks once the bias is calibrated, the same bytes for the same
// seed, lines the CSV reader (--csv_columns="label=click ignore=id") reads
// into the features the planted model scored, and a planted optimum well
// above chance.
#include "worker/datagen/avazu_synth.h"

#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "worker/data/csv_layout.h"
#include "worker/data/feature_hash.h"
#include "worker/datagen/bias_calibration.h"
#include "worker/eval/metrics.h"

namespace ps::datagen {
namespace {

constexpr int kRows = 20000;
constexpr char kHeader[] =
    "id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,"
    "app_domain,app_category,device_id,device_ip,device_model,device_type,"
    "device_conn_type,C14,C15,C16,C17,C18,C19,C20,C21";

// The planted model ps_datagen uses for --layout=avazu (LR, bias
// calibrated to 17%).
PlantedOptions CalibratedLr(const SynthOptions& options) {
  PlantedOptions planted;
  planted.seed = options.seed;
  planted.weight_stddev = AvazuSynth::kWeightStddev;
  planted.bias = 0;
  PlantedModel zero(planted);
  AvazuSynth sample(options, &zero);
  planted.bias = static_cast<float>(
      CalibrateBias(&sample, 20000, AvazuSynth::kClickRate, -30, 30));
  return planted;
}

std::vector<std::string_view> Split(std::string_view line) {
  std::vector<std::string_view> columns;
  size_t start = 0;
  while (true) {
    size_t end = line.find(',', start);
    columns.push_back(line.substr(start, end - start));
    if (end == std::string_view::npos) return columns;
    start = end + 1;
  }
}

bool IsHex8(std::string_view s) {
  if (s.size() != 8) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(c)) {
      return false;
    }
  }
  return true;
}

bool IsInteger(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

TEST(AvazuSynthTest, WritesTheAvazuColumns) {
  SynthOptions options;
  PlantedModel model(CalibratedLr(options));
  AvazuSynth synth(options, &model);
  ASSERT_EQ(synth.Header(), kHeader);
  const std::vector<std::string_view> names = Split(kHeader);
  ASSERT_EQ(names.size(), static_cast<size_t>(AvazuSynth::kColumns));
  std::vector<std::set<std::string>> distinct(AvazuSynth::kColumns);
  std::vector<float> p, labels;
  uint64_t clicks = 0, no_device_id = 0;
  std::string line;
  for (int i = 0; i < kRows; ++i) {
    double prob;
    int label = synth.NextRow(&line, &prob);
    ASSERT_EQ(line.find('"'), std::string::npos) << line;
    std::vector<std::string_view> cells = Split(line);
    ASSERT_EQ(cells.size(), static_cast<size_t>(AvazuSynth::kColumns)) << line;
    ASSERT_TRUE(IsInteger(cells[0]) && cells[0][0] != '-') << line;
    ASSERT_EQ(cells[1], label ? "1" : "0") << line;
    // hour: YYMMDDHH, 2014-10-21 to 2014-10-30.
    ASSERT_EQ(cells[2].size(), 8u) << line;
    int hour = std::stoi(std::string(cells[2]));
    EXPECT_GE(hour, 14102100) << line;
    EXPECT_LE(hour, 14103023) << line;
    EXPECT_LT(hour % 100, 24) << line;
    for (int c = 3; c < AvazuSynth::kColumns; ++c) {
      bool hashed = names[c].starts_with("site_") ||
                    names[c].starts_with("app_") || names[c] == "device_id" ||
                    names[c] == "device_ip" || names[c] == "device_model";
      EXPECT_TRUE(hashed ? IsHex8(cells[c]) : IsInteger(cells[c]))
          << names[c] << " in " << line;
      distinct[c].insert(std::string(cells[c]));
    }
    distinct[0].insert(std::string(cells[0]));
    distinct[2].insert(std::string(cells[2]));
    clicks += label;
    no_device_id += cells[11].empty();
    p.push_back(static_cast<float>(prob));
    labels.push_back(static_cast<float>(label));
  }
  EXPECT_EQ(distinct[0].size(), static_cast<size_t>(kRows));  // unique ids
  EXPECT_EQ(distinct[2].size(), 240u);                        // 10 days
  for (int c = 3; c < AvazuSynth::kColumns; ++c) {
    SCOPED_TRACE(names[c]);
    EXPECT_LE(distinct[c].size(), synth.ColumnValues(c));
    // The enumerations and the small columns are seen whole.
    if (synth.ColumnValues(c) <= 100) {
      EXPECT_EQ(distinct[c].size(), synth.ColumnValues(c));
    }
  }
  EXPECT_EQ(synth.ColumnValues(12), 6729486u);  // device_ip
  EXPECT_EQ(synth.ColumnValues(11), 2686408u);  // device_id
  EXPECT_EQ(synth.ColumnValues(3), 7u);         // C1
  // device_ip: a new value in most rows; device_id: one value in about 82%
  // of rows, then a tail of values seen once or twice.
  EXPECT_GT(distinct[12].size(), kRows / 2u);
  EXPECT_GT(distinct[11].size(), kRows / 10u);
  EXPECT_LT(distinct[11].size(), kRows / 4u);
  // The site and app ids have thousands of values.
  EXPECT_GT(distinct[5].size(), 1000u);
  EXPECT_GT(distinct[8].size(), 1000u);
  EXPECT_EQ(no_device_id, 0u);
  EXPECT_NEAR(static_cast<double>(clicks) / kRows, AvazuSynth::kClickRate,
              0.02);
  EXPECT_GT(eval::Auc(p, labels), 0.7);  // the planted optimum
}

TEST(AvazuSynthTest, VocabScaleShrinksTheBigColumnsOnly) {
  SynthOptions options;
  options.vocab_scale = 0.01;
  PlantedModel model(PlantedOptions{});
  AvazuSynth synth(options, &model);
  EXPECT_EQ(synth.ColumnValues(12), 67295u);  // device_ip
  EXPECT_EQ(synth.ColumnValues(5), 47u);      // site_id
  EXPECT_EQ(synth.ColumnValues(3), 7u);       // C1 keeps its 7
  EXPECT_EQ(synth.ColumnValues(7), 26u);      // site_category keeps its 26
}

std::vector<std::string> Rows(const SynthOptions& options, int rows) {
  PlantedModel model(CalibratedLr(options));
  AvazuSynth synth(options, &model);
  std::vector<std::string> lines(rows);
  double p;
  for (std::string& line : lines) synth.NextRow(&line, &p);
  return lines;
}

TEST(AvazuSynthTest, SameSeedSameBytes) {
  SynthOptions options;
  std::vector<std::string> a = Rows(options, 500);
  EXPECT_EQ(a, Rows(options, 500));
  options.seed = 2;
  EXPECT_NE(a, Rows(options, 500));
}

TEST(AvazuSynthTest, CsvReaderReadsWhatThePlantedModelScored) {
  SynthOptions options;
  PlantedModel model(CalibratedLr(options));
  AvazuSynth synth(options, &model);
  StatusOr<data::CsvSpec> spec = data::CsvSpec::Parse("label=click ignore=id");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  StatusOr<data::CsvLayout> layout =
      data::CsvLayout::FromHeader(*spec, synth.Header());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->num_fields(), 22u);  // hour and C1..C21
  EXPECT_EQ(layout->field_names()[0], "hour");
  std::string line;
  for (int i = 0; i < 1000; ++i) {
    double prob;
    int label = synth.NextRow(&line, &prob);
    data::ExampleBatch batch;
    ASSERT_TRUE(layout->ParseLine(line, &batch).ok()) << line;
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_EQ(batch.labels[0], static_cast<float>(label));
    ASSERT_EQ(batch.ids.size(), 22u);
    // The planted model sees the reader's ids of C1..C21 and, for the hour
    // token, the hour of the day (field 0, its last two digits).
    std::vector<uint64_t> ids(batch.ids.begin(), batch.ids.end());
    std::string_view hour = Split(line)[2];
    ids[0] = data::HashFeature(0, hour.substr(6));
    EXPECT_DOUBLE_EQ(model.Probability(ids), prob) << line;
  }
}

}  // namespace
}  // namespace ps::datagen
