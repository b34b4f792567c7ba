// OnehotSynth: a one-hot log in libsvm/libFM format, shaped like the Frappe
// app-usage log (vocabulary.h, OnehotVocabularies): each line is
// "label idx:1 idx:1 ..." with label 0/1 and one feature in each of the 10
// fields, in field order. idx is a global feature index, 1-based (libsvm
// tools want indices from 1) and unique across fields: the field's offset
// (the value counts of the fields before it, plus 1) plus the value's
// frequency rank. Labelled by a PlantedModel, which scores the features as
// ParseLibsvmLine reads them (the index hashed as field 0's token).
// Deterministic for a seed and the options.
//
// Thread safety: none; one OnehotSynth per thread.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "worker/data/example_batch.h"
#include "worker/datagen/categorical_fields.h"
#include "worker/datagen/planted_model.h"
#include "worker/datagen/row_synth.h"

namespace ps::datagen {

class OnehotSynth : public RowSynth {
 public:
  // The click rate ps_datagen plants when --bias is left unset: a third, as
  // in Frappe's libFM version (two sampled negatives a logged use).
  static constexpr double kClickRate = 1.0 / 3;

  // The planted weights' spread (--model=lr; halved for fm) when
  // --weight_stddev is left unset: its planted optimum AUC about 0.8 for LR,
  // 0.7 for FM.
  static constexpr double kWeightStddev = 0.5;

  // Reads options.seed, factor_rank and vocab_scale.
  OnehotSynth(const SynthOptions& options, const PlantedModel* model);

  int NextRow(std::string* line, double* probability) override;

  // The features in all: the sum of the fields' value counts.
  uint64_t features() const { return offsets_.back() - 1; }

 private:
  const PlantedModel* model_;
  std::mt19937_64 rng_;
  CategoricalFields fields_;
  std::vector<uint64_t> offsets_;  // global index of each field's rank 0
  double factor_rank_;
  std::vector<float> feature_scale_;
  data::ExampleBatch scratch_;
};

}  // namespace ps::datagen
