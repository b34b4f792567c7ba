// PlantedModel: the "true" model behind generated data. Its parameters are
// not stored: a feature's weight (and FM factor) is a pure function of the
// seed and the feature id, so the generator can score any row and a test can
// recompute the optimum without sharing memory with the generator.
//
//   LR: logit = bias + sum_i w(id_i)
//   FM: logit = bias + sum_i w(id_i) + sum_{i<j} <v(id_i), v(id_j)>
//
// with w ~ N(0, weight_stddev) and v = s * N(0, factor_stddev)^dim, where s
// is a per-feature factor scale the caller supplies (1 when it supplies
// none). CriteoSynth shrinks the factors of rare categories with it: an
// 8-dim factor of a category seen a few hundred times in 1M rows cannot be
// estimated by any learner (its noise exceeds its spread), so a planted
// model that leans on such factors has an optimum nothing can approach. In
// real click logs, too, the strong interactions are among frequent values.
// The scale depends only on the feature (its frequency rank in its field),
// so the planted model stays a fixed function of the features:
// RankFactorScale is that scale, the same for every layout.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ps::datagen {

struct PlantedOptions {
  enum class Kind { kLr, kFm } kind = Kind::kLr;
  uint64_t seed = 1;
  float bias = -1.2f;
  float weight_stddev = 0.2f;
  int fm_dim = 8;
  float factor_stddev = 0.12f;
};

// The factor scale of the value of frequency rank `rank` in its field (0: the
// most frequent): min(1, (factor_rank / (rank + 1))^2), full strength for the
// factor_rank most frequent values, then quickly fading; 1 when factor_rank
// is 0 (no scaling).
float RankFactorScale(double factor_rank, uint64_t rank);

class PlantedModel {
 public:
  explicit PlantedModel(const PlantedOptions& options) : o_(options) {}

  // factor_scale: empty (all 1) or one scale per id.
  double Logit(std::span<const uint64_t> ids,
               std::span<const float> factor_scale = {}) const;
  double Probability(std::span<const uint64_t> ids,
                     std::span<const float> factor_scale = {}) const;
  float Weight(uint64_t id) const;
  float Factor(uint64_t id, int k) const;
  const PlantedOptions& options() const { return o_; }

 private:
  // A standard normal number determined by (seed, id, salt).
  double Gaussian(uint64_t id, uint64_t salt) const;
  PlantedOptions o_;
};

}  // namespace ps::datagen
