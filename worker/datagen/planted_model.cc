#include "worker/datagen/planted_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ps::datagen {
namespace {

uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A uniform number in (0, 1) from 53 hashed bits.
double Unit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace

float RankFactorScale(double factor_rank, uint64_t rank) {
  if (factor_rank <= 0) return 1.0f;
  double shrink = std::min(1.0, factor_rank / (rank + 1.0));
  return static_cast<float>(shrink * shrink);
}

double PlantedModel::Gaussian(uint64_t id, uint64_t salt) const {
  uint64_t h = Mix(id ^ Mix(o_.seed * 0x9e3779b97f4a7c15ULL + salt));
  double u1 = Unit(h), u2 = Unit(Mix(h + 0x632be59bd9b4e019ULL));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

float PlantedModel::Weight(uint64_t id) const {
  return static_cast<float>(o_.weight_stddev * Gaussian(id, 0));
}

float PlantedModel::Factor(uint64_t id, int k) const {
  return static_cast<float>(o_.factor_stddev * Gaussian(id, 1 + k));
}

double PlantedModel::Logit(std::span<const uint64_t> ids,
                           std::span<const float> factor_scale) const {
  double logit = o_.bias;
  for (uint64_t id : ids) logit += Weight(id);
  if (o_.kind == PlantedOptions::Kind::kFm) {
    // sum_{i<j} <v_i, v_j> = (|sum v|^2 - sum |v|^2) / 2, per dimension.
    for (int k = 0; k < o_.fm_dim; ++k) {
      double sum = 0, sum_sq = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        double v = Factor(ids[i], k);
        if (!factor_scale.empty()) v *= factor_scale[i];
        sum += v;
        sum_sq += v * v;
      }
      logit += 0.5 * (sum * sum - sum_sq);
    }
  }
  return logit;
}

double PlantedModel::Probability(std::span<const uint64_t> ids,
                                 std::span<const float> factor_scale) const {
  return 1.0 / (1.0 + std::exp(-Logit(ids, factor_scale)));
}

}  // namespace ps::datagen
