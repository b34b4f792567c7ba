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
  for (int c = 0; c < kCriteoCategoricalColumns; ++c) {
    uint32_t vocab = std::max<uint32_t>(
        3, static_cast<uint32_t>(options.max_vocab / std::pow(3.0, c % 7)));
    std::vector<double> cdf(vocab);
    double total = 0;
    for (uint32_t r = 0; r < vocab; ++r) {
      total += 1.0 / std::pow(r + 1.0, options.zipf_exponent);
      cdf[r] = total;
    }
    for (double& x : cdf) x /= total;
    zipf_cdf_.push_back(std::move(cdf));
  }
  for (int f = 0; f < kCriteoFields; ++f) {
    // Some fields are often empty, most rarely, as in the real log.
    missing_.push_back(f % 5 == 2 ? 0.35 : 0.03);
  }
}

uint32_t CriteoSynth::SampleZipf(int field) {
  const auto& cdf = zipf_cdf_[field];
  double u = std::uniform_real_distribution<double>(0, 1)(rng_);
  return static_cast<uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), u) -
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
      uint64_t r = SampleZipf(c);
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
