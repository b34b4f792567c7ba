// The one-hot layout writes what it says: "label idx:1 ..." with one
// feature in each of the 10 Frappe-shaped fields, global indices unique
// across fields, about 5,400 features in all, about a third clicks once the
// bias is calibrated, the same bytes for the same seed, lines our libsvm
// parser reads into the very features the planted model scored, and a
// planted optimum well above chance.
#include "worker/datagen/onehot_synth.h"

#include <gtest/gtest.h>

#include <charconv>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "worker/data/line_parsers.h"
#include "worker/datagen/bias_calibration.h"
#include "worker/datagen/vocabulary.h"
#include "worker/eval/metrics.h"

namespace ps::datagen {
namespace {

constexpr int kRows = 20000;

// The planted model ps_datagen uses for --layout=onehot (LR, bias
// calibrated to a third).
PlantedOptions CalibratedLr(const SynthOptions& options) {
  PlantedOptions planted;
  planted.seed = options.seed;
  planted.weight_stddev = OnehotSynth::kWeightStddev;
  planted.bias = 0;
  PlantedModel zero(planted);
  OnehotSynth sample(options, &zero);
  planted.bias = static_cast<float>(
      CalibrateBias(&sample, 20000, OnehotSynth::kClickRate, -30, 30));
  return planted;
}

std::vector<std::string> Rows(const SynthOptions& options, int rows) {
  PlantedModel model(CalibratedLr(options));
  OnehotSynth synth(options, &model);
  std::vector<std::string> lines(rows);
  double p;
  for (std::string& line : lines) synth.NextRow(&line, &p);
  return lines;
}

TEST(OnehotSynthTest, FieldsAreFrappeShaped) {
  std::vector<FieldVocabulary> full = OnehotVocabularies(1);
  ASSERT_EQ(full.size(), static_cast<size_t>(kOnehotFields));
  uint64_t total = 0;
  for (const FieldVocabulary& f : full) total += f.size;
  EXPECT_EQ(total, 5382u);
  uint64_t tenth = 0;
  for (const FieldVocabulary& f : OnehotVocabularies(0.1)) {
    EXPECT_GE(f.size, 2u);
    tenth += f.size;
  }
  EXPECT_GT(tenth, 500u);
  EXPECT_LT(tenth, 560u);
}

TEST(OnehotSynthTest, WritesOneFeatureAFieldWithGlobalIndices) {
  SynthOptions options;
  PlantedModel model(CalibratedLr(options));
  OnehotSynth synth(options, &model);
  std::vector<FieldVocabulary> fields = OnehotVocabularies(1);
  EXPECT_EQ(synth.features(), 5382u);
  std::set<uint64_t> distinct;
  std::vector<float> p, labels;
  uint64_t clicks = 0;
  std::string line;
  for (int i = 0; i < kRows; ++i) {
    double prob;
    int label = synth.NextRow(&line, &prob);
    ASSERT_TRUE(label == 0 || label == 1);
    ASSERT_EQ(line.substr(0, 2), label ? "1 " : "0 ") << line;
    clicks += label;
    p.push_back(static_cast<float>(prob));
    labels.push_back(static_cast<float>(label));
    // "idx:1" items, one in each field's index range, in field order.
    std::string_view rest = std::string_view(line).substr(2);
    uint64_t offset = 1;
    for (int f = 0; f < kOnehotFields; ++f) {
      size_t end = rest.find(' ');
      std::string_view item = rest.substr(0, end);
      ASSERT_GT(item.size(), 2u) << line;
      ASSERT_EQ(item.substr(item.size() - 2), ":1") << line;
      uint64_t index = 0;
      auto [ptr, error] =
          std::from_chars(item.data(), item.data() + item.size() - 2, index);
      ASSERT_TRUE(error == std::errc() && ptr == item.data() + item.size() - 2)
          << line;
      EXPECT_GE(index, offset) << line;
      EXPECT_LT(index, offset + fields[f].size) << line;
      distinct.insert(index);
      offset += fields[f].size;
      rest = end == std::string_view::npos ? std::string_view()
                                           : rest.substr(end + 1);
    }
    EXPECT_TRUE(rest.empty()) << line;
  }
  // Frappe's shape at 20k rows: every small field whole, most of the 957
  // users, a good part of the 4,082 items (a long tail, as app popularity).
  EXPECT_GT(distinct.size(), 3000u);
  EXPECT_LE(distinct.size(), 5382u);
  EXPECT_NEAR(static_cast<double>(clicks) / kRows, 1.0 / 3, 0.02);
  EXPECT_GT(eval::Auc(p, labels), 0.75);  // the planted optimum
}

TEST(OnehotSynthTest, SameSeedSameBytes) {
  SynthOptions options;
  std::vector<std::string> a = Rows(options, 500);
  EXPECT_EQ(a, Rows(options, 500));
  options.seed = 2;
  EXPECT_NE(a, Rows(options, 500));
}

TEST(OnehotSynthTest, LibsvmParserReadsWhatThePlantedModelScored) {
  SynthOptions options;
  PlantedModel model(CalibratedLr(options));
  OnehotSynth synth(options, &model);
  std::string line;
  for (int i = 0; i < 1000; ++i) {
    double prob;
    int label = synth.NextRow(&line, &prob);
    data::ExampleBatch batch;
    ASSERT_TRUE(data::ParseLibsvmLine(line, &batch).ok()) << line;
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_EQ(batch.labels[0], static_cast<float>(label));
    ASSERT_EQ(batch.ids.size(), static_cast<size_t>(kOnehotFields));
    for (size_t k = 0; k < batch.ids.size(); ++k) {
      EXPECT_EQ(batch.values[k], 1.0f);
      EXPECT_EQ(batch.fields[k], 0u);  // libsvm: every feature in field 0
    }
    EXPECT_DOUBLE_EQ(model.Probability(batch.ids), prob) << line;
  }
}

}  // namespace
}  // namespace ps::datagen
