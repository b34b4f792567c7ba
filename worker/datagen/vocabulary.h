// Vocabulary shapes of ps_datagen: how many values each of the 26
// categorical fields has and how skewed their frequencies are (and, last,
// the 10 fields of the one-hot layout).
//
//   kSmall   field c gets max_vocab / 3^(c % 7) values (at least 3), all with
//            one Zipf exponent: small enough that every value is seen often
//            in 1M rows, for fast tests and the demo.
//   kCriteo  the per-field cardinalities of the Criteo Kaggle log (C3 has
//            10.1M values, C9 three), each with its own Zipf exponent, so
//            the big fields have the long tail of values seen once that real
//            click logs have (see vocabulary.cc for the sources).
//
// Both shapes keep CriteoSynth's missing-value shares (35% of the cells of
// every fifth field, 3% of the others): the real log's are said to be far
// higher in some fields (I12, C22), but we found no per-field table we could
// cite, so we did not invent one.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::datagen {

enum class VocabShape { kSmall, kCriteo };

// "small" or "criteo"; kInvalidArgument for anything else.
StatusOr<VocabShape> ParseVocabShape(std::string_view name);

struct FieldVocabulary {
  uint64_t size;    // values, ranks 0..size-1
  double exponent;  // P(rank r) proportional to (r + 1)^-exponent
};

// The small shape: 26 fields, max_vocab / 3^(c % 7) values (at least 3).
std::vector<FieldVocabulary> SmallVocabularies(uint32_t max_vocab,
                                               double exponent);

// The Criteo Kaggle shape, each field's cardinality times scale (rounded,
// at least 2 values); the exponents do not change with the scale.
std::vector<FieldVocabulary> CriteoVocabularies(double scale);

// The one-hot layout's 10 fields (layout.h), shaped like the Frappe
// app-usage log (user, item, then 8 context fields; 5,382 values in all),
// each field's value count times scale (rounded, at least 2 values).
inline constexpr int kOnehotFields = 10;
std::vector<FieldVocabulary> OnehotVocabularies(double scale);

}  // namespace ps::datagen
