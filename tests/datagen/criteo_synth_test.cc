// CriteoSynth's two vocabulary shapes: kSmall writes, byte for byte, the rows
// it wrote before kCriteo existed (the fast tests and the demo were tuned on
// them), and kCriteo's rows have the statistics of the Criteo Kaggle log:
// distinct values per field ordered like the published cardinalities, the
// big fields made mostly of values seen once, the small ones whole and
// never above their cardinality.
#include "worker/datagen/criteo_synth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "worker/data/line_parsers.h"
#include "worker/datagen/planted_model.h"
#include "worker/datagen/vocabulary.h"

namespace ps::datagen {
namespace {

using data::kCriteoCategoricalColumns;
using data::kCriteoIntegerColumns;

uint64_t Fnv1a(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// FNV-1a of the rows as ps_datagen writes them (a newline after each).
uint64_t HashOfRows(const SynthOptions& options, const PlantedOptions& planted,
                    int rows) {
  PlantedModel model(planted);
  CriteoSynth synth(options, &model);
  uint64_t h = 0xcbf29ce484222325ULL;
  std::string line;
  double p;
  for (int i = 0; i < rows; ++i) {
    synth.NextRow(&line, &p);
    h = Fnv1a(Fnv1a(h, line), "\n");
  }
  return h;
}

// The hashes are those of `ps_datagen --rows=2000 --eval_rows=0` (and with
// --model=fm) as built before --vocab existed.
TEST(CriteoSynthTest, SmallShapeWritesTheRowsItAlwaysWrote) {
  SynthOptions options;  // ps_datagen's defaults
  options.factor_rank = 30;
  PlantedOptions lr;
  EXPECT_EQ(HashOfRows(options, lr, 2000), 0xe8385b4e06d0322bULL);
  PlantedOptions fm;
  fm.kind = PlantedOptions::Kind::kFm;
  fm.weight_stddev = 0.1f;
  EXPECT_EQ(HashOfRows(options, fm, 2000), 0x695fa9f222399623ULL);
}

TEST(CriteoSynthTest, ParsesVocabShape) {
  EXPECT_EQ(*ParseVocabShape("small"), VocabShape::kSmall);
  EXPECT_EQ(*ParseVocabShape("criteo"), VocabShape::kCriteo);
  StatusOr<VocabShape> bad = ParseVocabShape("Criteo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--vocab must be"), std::string::npos);
}

TEST(CriteoSynthTest, CriteoVocabulariesScaleAndKeepTwoValues) {
  std::vector<FieldVocabulary> full = CriteoVocabularies(1);
  std::vector<FieldVocabulary> tenth = CriteoVocabularies(0.1);
  std::vector<FieldVocabulary> tiny = CriteoVocabularies(1e-6);
  ASSERT_EQ(full.size(), static_cast<size_t>(kCriteoCategoricalColumns));
  EXPECT_EQ(full[2].size, 10131227u);  // C3, the biggest
  EXPECT_EQ(full[8].size, 3u);         // C9, the smallest
  for (int c = 0; c < kCriteoCategoricalColumns; ++c) {
    EXPECT_EQ(tenth[c].size,
              std::max<uint64_t>(2, std::llround(full[c].size * 0.1)))
        << "C" << c + 1;
    EXPECT_EQ(tiny[c].size,
              std::max<uint64_t>(2, std::llround(full[c].size * 1e-6)))
        << "C" << c + 1;
    EXPECT_EQ(tenth[c].exponent, full[c].exponent);
    EXPECT_GT(full[c].exponent, 0.5);
    EXPECT_LE(full[c].exponent, 1.1);
  }
}

TEST(CriteoSynthTest, CriteoShapeIsDeterministicForASeed) {
  SynthOptions options;
  options.vocab = VocabShape::kCriteo;
  PlantedOptions planted;
  uint64_t a = HashOfRows(options, planted, 500);
  EXPECT_EQ(a, HashOfRows(options, planted, 500));
  options.seed = 2;
  planted.seed = 2;
  EXPECT_NE(a, HashOfRows(options, planted, 500));
}

struct FieldCounts {
  uint64_t distinct = 0, singletons = 0, present = 0;
};

// Distinct values, values seen once, and non-empty cells per categorical
// field in `rows` rows of the full-size Criteo shape.
std::vector<FieldCounts> CountCriteoFields(int rows) {
  SynthOptions options;
  options.vocab = VocabShape::kCriteo;
  options.factor_rank = 30;
  PlantedModel model(PlantedOptions{});  // LR: the quickest to score
  CriteoSynth synth(options, &model);
  // Tokens are 8 hex digits: kept as numbers, sorted and counted in runs.
  std::vector<std::vector<uint32_t>> seen(kCriteoCategoricalColumns);
  std::vector<FieldCounts> counts(kCriteoCategoricalColumns);
  std::string line;
  double p;
  for (int i = 0; i < rows; ++i) {
    synth.NextRow(&line, &p);
    size_t start = 0;
    for (int column = 0;
         column <= kCriteoIntegerColumns + kCriteoCategoricalColumns;
         ++column) {
      size_t end = line.find('\t', start);
      if (end == std::string::npos) end = line.size();
      int c = column - 1 - kCriteoIntegerColumns;  // column 0 is the label
      if (c >= 0 && end > start) {
        uint32_t token = 0;
        auto [ptr, error] =
            std::from_chars(line.data() + start, line.data() + end, token, 16);
        EXPECT_TRUE(error == std::errc() && ptr == line.data() + end) << line;
        seen[c].push_back(token);
        ++counts[c].present;
      }
      start = end + 1;
    }
  }
  for (int c = 0; c < kCriteoCategoricalColumns; ++c) {
    std::vector<uint32_t>& tokens = seen[c];
    std::sort(tokens.begin(), tokens.end());
    for (size_t i = 0; i < tokens.size();) {
      size_t j = i;
      while (j < tokens.size() && tokens[j] == tokens[i]) ++j;
      ++counts[c].distinct;
      counts[c].singletons += j - i == 1;
      i = j;
    }
  }
  return counts;
}

TEST(CriteoSynthTest, CriteoShapeHasTheKaggleLogsStatistics) {
  constexpr int kRows = 200000;
  const std::vector<FieldVocabulary> vocab = CriteoVocabularies(1);
  const std::vector<FieldCounts> counts = CountCriteoFields(kRows);
  for (int c = 0; c < kCriteoCategoricalColumns; ++c) {
    SCOPED_TRACE(::testing::Message() << "C" << c + 1);
    EXPECT_LE(counts[c].distinct, vocab[c].size);
    // Fields of up to a thousand values are seen whole in 200k rows.
    if (vocab[c].size <= 1000) {
      EXPECT_EQ(counts[c].distinct, vocab[c].size);
    }
    // The five fields of millions of values: mostly values seen once,
    // and a new value in more than a third of the rows.
    if (vocab[c].size >= 1000000) {
      EXPECT_GT(counts[c].singletons, counts[c].distinct * 3 / 4);
      EXPECT_GT(counts[c].distinct, counts[c].present / 3);
    }
  }
  EXPECT_EQ(counts[8].distinct, 3u);   // C9
  EXPECT_EQ(counts[19].distinct, 4u);  // C20
  // The distinct counts follow the cardinalities: a field with 1.5 times
  // the values of another shows more of them.
  for (int a = 0; a < kCriteoCategoricalColumns; ++a) {
    for (int b = 0; b < kCriteoCategoricalColumns; ++b) {
      if (vocab[b].size >= vocab[a].size * 3 / 2) {
        EXPECT_GT(counts[b].distinct, counts[a].distinct)
            << "C" << b + 1 << " (" << vocab[b].size << " values) vs C" << a + 1
            << " (" << vocab[a].size << ")";
      }
    }
  }
}

}  // namespace
}  // namespace ps::datagen
