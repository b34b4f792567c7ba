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
#include "worker/datagen/planted_model.h"
#include "worker/datagen/vocabulary.h"
#include "worker/datagen/zipf_sampler.h"

namespace ps::datagen {

struct SynthOptions {
  uint64_t seed = 1;
  // kSmall: the largest categorical vocabulary (field c gets about
  // max_vocab / 3^(c % 7)) and the fields' Zipf exponent.
  uint32_t max_vocab = 100;
  double zipf_exponent = 1.1;
  // Planted FM factors of the category of frequency rank r (0: the most
  // frequent of its field) are scaled by min(1, (factor_rank / (r + 1))^2):
  // full strength for the factor_rank most frequent values, then quickly
  // fading (see planted_model.h for why). 0: no scaling.
  double factor_rank = 0;
  // Last, so that SynthOptions{seed, max_vocab, zipf_exponent, factor_rank}
  // keeps its meaning.
  VocabShape vocab = VocabShape::kSmall;
  // kCriteo: each field's Kaggle cardinality is scaled by this (at least 2
  // values a field); the per-field exponents stay.
  double vocab_scale = 1;
};

class CriteoSynth {
 public:
  CriteoSynth(const SynthOptions& options, const PlantedModel* model);

  // Writes one labelled TSV line (no newline) into *line; *probability is
  // the planted click probability of the row.
  void NextRow(std::string* line, double* probability);

 private:
  // A frequency rank (0: the most frequent value) of categorical field c.
  uint64_t SampleRank(int c);

  const PlantedModel* model_;
  std::mt19937_64 rng_;
  // Per categorical field: kSmall a CDF table (its draws are what the fast
  // tests and the demo were tuned on, so they stay), kCriteo a sampler.
  std::vector<std::vector<double>> zipf_cdf_;
  std::vector<ZipfSampler> samplers_;
  std::vector<double> missing_;  // per field, 39
  double factor_rank_;
  std::vector<float> field_scale_;  // this row's factor scale per field
  std::vector<float> feature_scale_;
  data::ExampleBatch scratch_;
  uint64_t token_salt_;
};

}  // namespace ps::datagen
