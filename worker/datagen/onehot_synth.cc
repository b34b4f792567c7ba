#include "worker/datagen/onehot_synth.h"

#include "worker/data/line_parsers.h"
#include "worker/datagen/vocabulary.h"

namespace ps::datagen {

OnehotSynth::OnehotSynth(const SynthOptions& options, const PlantedModel* model)
    : model_(model),
      // Another stream than the Criteo layout's for the same seed.
      rng_(options.seed ^ 0x6f6e65686f74ULL),
      fields_(OnehotVocabularies(options.vocab_scale),
              CategoricalFields::Sampling::kRejection),
      factor_rank_(options.factor_rank) {
  offsets_.push_back(1);
  for (int f = 0; f < fields_.size(); ++f) {
    offsets_.push_back(offsets_.back() + fields_.vocabulary(f).size);
  }
}

int OnehotSynth::NextRow(std::string* line, double* probability) {
  std::string features;
  feature_scale_.clear();
  for (int f = 0; f < fields_.size(); ++f) {
    uint64_t rank = fields_.SampleRank(f, rng_);
    features += ' ';
    features += std::to_string(offsets_[f] + rank);
    features += ":1";
    feature_scale_.push_back(RankFactorScale(factor_rank_, rank));
  }
  // Score the row exactly as a reader will see it: one feature a field, in
  // field order, so feature_scale_ lines up with the parsed ids.
  scratch_.Clear();
  (void)data::ParseLibsvmLine("0" + features, &scratch_);
  *probability = model_->Probability(scratch_.ids, feature_scale_);
  int label =
      std::uniform_real_distribution<double>(0, 1)(rng_) < *probability ? 1 : 0;
  *line = std::to_string(label) + features;
  return label;
}

}  // namespace ps::datagen
