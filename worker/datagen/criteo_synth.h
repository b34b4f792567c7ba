// CriteoSynth: rows shaped like the Criteo click log (13 integer counts with
// log-normal values, 26 categorical fields with Zipf-distributed tokens,
// missing values in both), each labelled by a PlantedModel. The fields'
// vocabularies follow a VocabShape (vocabulary.h): a handful to thousands of
// values (kSmall), or the Criteo Kaggle log's cardinalities, up to 10^7
// (kCriteo). Deterministic for a seed and the options.
//
// Memory: kSmall keeps a frequency table of one double per value (so
// max_vocab is bounded); kCriteo samples with ZipfSampler in O(1) memory per
// field, and the planted model is a hash of the feature id, so a field of
// 10^7 values costs nothing.
//
// Thread safety: none; one CriteoSynth per thread.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "worker/data/example_batch.h"
#include "worker/datagen/categorical_fields.h"
#include "worker/datagen/planted_model.h"
#include "worker/datagen/row_synth.h"
#include "worker/datagen/vocabulary.h"

namespace ps::datagen {

// The Criteo layout's draws, shared with what measures tables on
// Criteo-shaped keys (bench/criteo_keys.h):
// The share of rows whose field f (0..38: 13 integer columns, then 26
// categorical) is missing.
double CriteoMissingShare(int field);
// A value of integer column f (0..12): log-normal, I2 also negative.
// `normal` is the caller's, so that its cached second draw carries over.
int64_t CriteoIntegerCell(int field, std::normal_distribution<double>& normal,
                          std::mt19937_64& rng);

class CriteoSynth : public RowSynth {
 public:
  CriteoSynth(const SynthOptions& options, const PlantedModel* model);

  // Writes one labelled TSV line (no newline) into *line; *probability is
  // the planted click probability of the row. Returns the label.
  int NextRow(std::string* line, double* probability) override;

 private:
  const PlantedModel* model_;
  std::mt19937_64 rng_;
  // The 26 categorical fields: kSmall samples from CDF tables (its draws are
  // what the fast tests and the demo were tuned on, so they stay), kCriteo
  // with ZipfSampler.
  CategoricalFields categorical_;
  std::vector<double> missing_;  // per field, 39
  double factor_rank_;
  std::vector<float> field_scale_;  // this row's factor scale per field
  std::vector<float> feature_scale_;
  data::ExampleBatch scratch_;
  uint64_t token_salt_;
};

}  // namespace ps::datagen
