#include "worker/datagen/criteo_synth.h"

#include <cmath>
#include <cstdio>

#include "worker/data/line_parsers.h"

namespace ps::datagen {

using data::kCriteoCategoricalColumns;
using data::kCriteoFields;
using data::kCriteoIntegerColumns;

double CriteoMissingShare(int field) {
  // Some fields are often empty, most rarely, as in the real log.
  return field % 5 == 2 ? 0.35 : 0.03;
}

int64_t CriteoIntegerCell(int field, std::normal_distribution<double>& normal,
                          std::mt19937_64& rng) {
  const double mu = 0.5 + 0.35 * field;
  int64_t v = static_cast<int64_t>(std::exp(mu + 1.2 * normal(rng)));
  if (field == 1) v -= 3;  // like I2, which goes negative
  return v;
}

CriteoSynth::CriteoSynth(const SynthOptions& options, const PlantedModel* model)
    : model_(model),
      rng_(options.seed),
      categorical_(
          options.vocab == VocabShape::kSmall
              ? SmallVocabularies(options.max_vocab, options.zipf_exponent)
              : CriteoVocabularies(options.vocab_scale),
          options.vocab == VocabShape::kSmall
              ? CategoricalFields::Sampling::kTable
              : CategoricalFields::Sampling::kRejection),
      factor_rank_(options.factor_rank),
      field_scale_(kCriteoFields, 1.0f),
      token_salt_(options.seed * 7919) {
  for (int f = 0; f < kCriteoFields; ++f) {
    missing_.push_back(CriteoMissingShare(f));
  }
}

int CriteoSynth::NextRow(std::string* line, double* probability) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> normal(0, 1);
  std::string columns;
  char buf[32];
  for (int f = 0; f < kCriteoFields; ++f) {
    columns += '\t';
    field_scale_[f] = 1.0f;
    if (unit(rng_) < missing_[f]) continue;
    if (f < kCriteoIntegerColumns) {
      std::snprintf(buf, sizeof(buf), "%lld",
                    static_cast<long long>(CriteoIntegerCell(f, normal, rng_)));
    } else {
      int c = f - kCriteoIntegerColumns;
      uint64_t r = categorical_.SampleRank(c, rng_);
      field_scale_[f] = RankFactorScale(factor_rank_, r);
      std::snprintf(buf, sizeof(buf), "%08x",
                    HashedToken(token_salt_, static_cast<uint64_t>(c), r));
    }
    columns += buf;
  }
  // Score the row exactly as a reader will see it.
  scratch_.Clear();
  std::string unlabelled = "0" + columns;
  (void)data::ParseCriteoLine(unlabelled, &scratch_);
  feature_scale_.clear();
  for (uint32_t field : scratch_.fields) {
    feature_scale_.push_back(field < field_scale_.size() ? field_scale_[field]
                                                         : 1.0f);
  }
  *probability = model_->Probability(scratch_.ids, feature_scale_);
  int label = unit(rng_) < *probability ? 1 : 0;
  *line = std::to_string(label) + columns;
  return label;
}

}  // namespace ps::datagen
