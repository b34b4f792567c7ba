#include "worker/datagen/vocabulary.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/data/line_parsers.h"

namespace ps::datagen {
namespace {

// The number of distinct values of C1..C26 in the training log of the
// Criteo Kaggle Display Advertising Challenge (45,840,617 rows, 7 days), as
// tabulated by the DLRM repository and paper (Naumov et al. 2019, "Deep
// Learning Recommendation Model for Personalization and Recommendation
// Systems"; facebookresearch/dlrm) and in TorchRec's Criteo documentation
// (torchrec.datasets.criteo, the Kaggle per-feature counts).
constexpr uint64_t kKaggleCardinality[data::kCriteoCategoricalColumns] = {
    // C1..C9
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3,
    // C10..C18
    93145, 5683, 8351593, 3194, 27, 14992, 5461306, 10, 5652,
    // C19..C26
    2173, 4, 7046547, 18, 15, 286181, 105, 142572};

// Zipf exponents per field. A bounded Zipf law over a field's published n
// values only reproduces that count if a log as long as Kaggle's shows most
// of them: each field gets the steepest exponent, at most 1.1 (the small
// shape's default), at which 45.84M rows (less the field's missing share)
// are expected to show at least 90% of its n values, rounded down to two
// digits. Steeper laws leave too many published values unseen; a flatter one
// than needed would take the weight of the head values (click-log fields
// have a head) without need. Computed offline from E[distinct] =
// sum_r 1 - exp(-rows * p_r). Every field up to 3e5 values is seen whole at
// 1.1; the five biggest come out flatter, and with them the tail the real
// log has: in 1M rows C3 shows ~0.8M distinct values, ~90% of them once.
constexpr double kKaggleExponent[data::kCriteoCategoricalColumns] = {
    // C1..C9
    1.1, 1.1, 0.66, 1.0, 1.1, 1.1, 1.1, 1.1, 1.1,
    // C10..C18
    1.1, 1.1, 0.73, 1.1, 1.1, 1.1, 0.84, 1.1, 1.1,
    // C19..C26
    1.1, 1.1, 0.78, 1.1, 1.1, 1.1, 1.1, 1.1};

// The one-hot layout: the fields of the Frappe context-aware app-usage log
// (Baltrunas et al. 2015, "Frappe: understanding the usage and perception
// of mobile app recommendations in-the-wild"; 288,609 rows, 5,382 one-hot
// features in 10 fields in its libFM version used by the NFM and AFM
// papers). The per-field counts are as we recall the paper's (they add up
// to the published 5,382): two big id fields, a handful of tiny context
// fields and two geographic ones of tens and hundreds.
constexpr uint64_t kOnehotCardinality[kOnehotFields] = {
    957,   // user
    4082,  // item (app)
    7,     // daytime (morning, afternoon, ...)
    7,     // weekday
    2,     // isweekend
    3,     // homework (home, work, unknown)
    2,     // cost (free, paid)
    9,     // weather
    80,    // country
    233};  // city
// Skews, chosen, not fitted (we know of no published per-field frequency
// table): app popularity is the steepest (Zipf 1.0), users less so (a few
// heavy users); the calendar fields nearly uniform; free apps, the home
// context, the usual weather, a few countries and cities dominate.
constexpr double kOnehotExponent[kOnehotFields] = {0.8, 1.0, 0.3, 0.1, 1.3,
                                                   1.0, 2.0, 1.2, 1.5, 1.2};

// value count * scale, rounded, at least 2.
uint64_t Scaled(uint64_t values, double scale) {
  double n = std::round(static_cast<double>(values) * scale);
  return static_cast<uint64_t>(std::max(2.0, n));
}

}  // namespace

StatusOr<VocabShape> ParseVocabShape(std::string_view name) {
  if (name == "small") return VocabShape::kSmall;
  if (name == "criteo") return VocabShape::kCriteo;
  return InvalidArgument("--vocab must be small or criteo, not '" +
                         std::string(name) + "'");
}

std::vector<FieldVocabulary> SmallVocabularies(uint32_t max_vocab,
                                               double exponent) {
  std::vector<FieldVocabulary> fields;
  for (int c = 0; c < data::kCriteoCategoricalColumns; ++c) {
    uint32_t vocab = std::max<uint32_t>(
        3, static_cast<uint32_t>(max_vocab / std::pow(3.0, c % 7)));
    fields.push_back({vocab, exponent});
  }
  return fields;
}

std::vector<FieldVocabulary> CriteoVocabularies(double scale) {
  std::vector<FieldVocabulary> fields;
  for (int c = 0; c < data::kCriteoCategoricalColumns; ++c) {
    fields.push_back(
        {Scaled(kKaggleCardinality[c], scale), kKaggleExponent[c]});
  }
  return fields;
}

std::vector<FieldVocabulary> OnehotVocabularies(double scale) {
  std::vector<FieldVocabulary> fields;
  for (int f = 0; f < kOnehotFields; ++f) {
    fields.push_back(
        {Scaled(kOnehotCardinality[f], scale), kOnehotExponent[f]});
  }
  return fields;
}

}  // namespace ps::datagen
