#include "worker/datagen/categorical_fields.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "protocol/shard_map.h"

namespace ps::datagen {

CategoricalFields::CategoricalFields(std::vector<FieldVocabulary> fields,
                                     Sampling sampling)
    : fields_(std::move(fields)) {
  for (const FieldVocabulary& field : fields_) {
    if (sampling == Sampling::kTable) {
      std::vector<double> cdf(field.size);
      double total = 0;
      for (uint64_t r = 0; r < field.size; ++r) {
        total += 1.0 / std::pow(r + 1.0, field.exponent);
        cdf[r] = total;
      }
      for (double& x : cdf) x /= total;
      cdf_.push_back(std::move(cdf));
    } else {
      // Our own vocabularies are valid: an error here is a bug.
      samplers_.push_back(
          ZipfSampler::Create(field.size, field.exponent).value());
    }
  }
}

uint64_t CategoricalFields::SampleRank(int field, std::mt19937_64& rng) const {
  if (!samplers_.empty()) return samplers_[field].Sample(rng);
  const std::vector<double>& cdf = cdf_[field];
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  return static_cast<uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u) -
                               cdf.begin());
}

uint32_t HashedToken(uint64_t salt, uint64_t field, uint64_t rank) {
  uint64_t token = protocol::Mix64((rank + 1) * 0x9e3779b97f4a7c15ULL ^
                                   protocol::Mix64(salt + field));
  return static_cast<uint32_t>(token >> 32);
}

}  // namespace ps::datagen
