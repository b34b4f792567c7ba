// CriteoSynth: rows shaped like the Criteo click log (13 integer counts with
// log-normal values, 26 categorical fields with Zipf-distributed tokens and
// vocabularies from a handful to thousands, missing values in both), each
// labelled by a PlantedModel. Deterministic for a seed.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "worker/data/example_batch.h"
#include "worker/datagen/planted_model.h"

namespace ps::datagen {

struct SynthOptions {
  uint64_t seed = 1;
  // Largest categorical vocabulary; field c gets about max_vocab / 3^(c % 7).
  uint32_t max_vocab = 100;
  double zipf_exponent = 1.1;
  // Planted FM factors of the category of frequency rank r (0: the most
  // frequent of its field) are scaled by min(1, (factor_rank / (r + 1))^2):
  // full strength for the factor_rank most frequent values, then quickly
  // fading (see planted_model.h for why). 0: no scaling.
  double factor_rank = 0;
};

class CriteoSynth {
 public:
  CriteoSynth(const SynthOptions& options, const PlantedModel* model);

  // Writes one labelled TSV line (no newline) into *line; *probability is
  // the planted click probability of the row.
  void NextRow(std::string* line, double* probability);

 private:
  uint32_t SampleZipf(int field);

  const PlantedModel* model_;
  std::mt19937_64 rng_;
  std::vector<std::vector<double>> zipf_cdf_;  // per categorical field
  std::vector<double> missing_;                // per field, 39
  double factor_rank_;
  std::vector<float> field_scale_;  // this row's factor scale per field
  std::vector<float> feature_scale_;
  data::ExampleBatch scratch_;
  uint64_t token_salt_;
};

}  // namespace ps::datagen
