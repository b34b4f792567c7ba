#include "worker/datagen/criteo_synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "protocol/shard_map.h"
#include "worker/data/line_parsers.h"

namespace ps::datagen {

using data::kCriteoCategoricalColumns;
using data::kCriteoFields;
using data::kCriteoIntegerColumns;

CriteoSynth::CriteoSynth(const SynthOptions& options, const PlantedModel* model)
    : model_(model),
      rng_(options.seed),
      factor_rank_(options.factor_rank),
      field_scale_(kCriteoFields, 1.0f),
      token_salt_(options.seed * 7919) {
  if (options.vocab == VocabShape::kSmall) {
    for (const FieldVocabulary& field :
         SmallVocabularies(options.max_vocab, options.zipf_exponent)) {
      std::vector<double> cdf(field.size);
      double total = 0;
      for (uint64_t r = 0; r < field.size; ++r) {
        total += 1.0 / std::pow(r + 1.0, field.exponent);
        cdf[r] = total;
      }
      for (double& x : cdf) x /= total;
      zipf_cdf_.push_back(std::move(cdf));
    }
  } else {
    for (const FieldVocabulary& field :
         CriteoVocabularies(options.vocab_scale)) {
      // The vocabularies are ours and valid: an error here is a bug.
      samplers_.push_back(
          ZipfSampler::Create(field.size, field.exponent).value());
    }
  }
  for (int f = 0; f < kCriteoFields; ++f) {
    // Some fields are often empty, most rarely, as in the real log.
    missing_.push_back(f % 5 == 2 ? 0.35 : 0.03);
  }
}

uint64_t CriteoSynth::SampleRank(int c) {
  if (!samplers_.empty()) return samplers_[c].Sample(rng_);
  const auto& cdf = zipf_cdf_[c];
  double u = std::uniform_real_distribution<double>(0, 1)(rng_);
  return static_cast<uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u) -
                               cdf.begin());
}

void CriteoSynth::NextRow(std::string* line, double* probability) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> normal(0, 1);
  std::string columns;
  char buf[32];
  for (int f = 0; f < kCriteoFields; ++f) {
    columns += '\t';
    field_scale_[f] = 1.0f;
    if (unit(rng_) < missing_[f]) continue;
    if (f < kCriteoIntegerColumns) {
      double mu = 0.5 + 0.35 * f;
      long long v = static_cast<long long>(std::exp(mu + 1.2 * normal(rng_)));
      if (f == 1) v -= 3;  // like I2, which goes negative
      std::snprintf(buf, sizeof(buf), "%lld", v);
    } else {
      int c = f - kCriteoIntegerColumns;
      uint64_t r = SampleRank(c);
      if (factor_rank_ > 0) {
        double shrink = std::min(1.0, factor_rank_ / (r + 1.0));
        field_scale_[f] = static_cast<float>(shrink * shrink);
      }
      uint64_t token = protocol::Mix64(
          (r + 1) * 0x9e3779b97f4a7c15ULL ^
          protocol::Mix64(token_salt_ + static_cast<uint64_t>(c)));
      std::snprintf(buf, sizeof(buf), "%08x",
                    static_cast<uint32_t>(token >> 32));
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
}

}  // namespace ps::datagen
