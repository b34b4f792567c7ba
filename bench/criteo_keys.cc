#include "bench/criteo_keys.h"

#include <algorithm>

#include "worker/data/feature_hash.h"
#include "worker/data/line_parsers.h"
#include "worker/datagen/criteo_synth.h"
#include "worker/datagen/vocabulary.h"

namespace ps::bench {
namespace {

using data::kCriteoIntegerColumns;

double ScaleFor(uint64_t ids) {
  uint64_t kaggle = 0;
  for (const auto& f : datagen::CriteoVocabularies(1)) kaggle += f.size;
  const double integer_ids = kCriteoIntegerColumns * (CriteoKeys::kBuckets + 1);
  // ps_datagen's range of --vocab_scale.
  return std::clamp((static_cast<double>(ids) - integer_ids) / kaggle, 1e-6,
                    10.0);
}

}  // namespace

CriteoKeys::CriteoKeys(uint64_t ids)
    : scale_(ScaleFor(ids)),
      categorical_(datagen::CriteoVocabularies(scale_),
                   datagen::CategoricalFields::Sampling::kRejection) {
  uint64_t next = 1;
  for (int f = 0; f < kFields; ++f) {
    first_id_[f] = next;
    next += (f < kCriteoIntegerColumns
                 ? kBuckets
                 : categorical_.vocabulary(f - kCriteoIntegerColumns).size) +
            1;
  }
  ids_ = next - 1;
}

void CriteoKeys::Example(std::mt19937_64& rng, std::span<uint64_t> out) {
  std::uniform_real_distribution<double> unit(0, 1);
  for (int f = 0; f < kFields; ++f) {
    const bool integer = f < kCriteoIntegerColumns;
    const uint64_t values =
        integer ? kBuckets
                : categorical_.vocabulary(f - kCriteoIntegerColumns).size;
    uint64_t value;
    if (unit(rng) < datagen::CriteoMissingShare(f)) {
      value = values;  // the field's "missing" id
    } else if (integer) {
      const int64_t bucket =
          data::LogBucket(datagen::CriteoIntegerCell(f, normal_, rng)) + 3;
      value = static_cast<uint64_t>(
          std::clamp<int64_t>(bucket, 0, static_cast<int64_t>(kBuckets) - 1));
    } else {
      value = categorical_.SampleRank(f - kCriteoIntegerColumns, rng);
    }
    out[f] = first_id_[f] + value;
  }
}

}  // namespace ps::bench
