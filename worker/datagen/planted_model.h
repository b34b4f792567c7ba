// PlantedModel: the "true" model behind generated data. Its parameters are
// not stored: a feature's weight (and FM factor) is a pure function of the
// seed and the feature id, so the generator can score any row and a test can
// recompute the optimum without sharing memory with the generator.
//
//   LR: logit = bias + sum_i w(id_i)
//   FM: logit = bias + sum_i w(id_i) + sum_{i<j} <v(id_i), v(id_j)>
//
// with w ~ N(0, weight_stddev) and v ~ N(0, factor_stddev)^dim.
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

class PlantedModel {
 public:
  explicit PlantedModel(const PlantedOptions& options) : o_(options) {}

  double Logit(std::span<const uint64_t> ids) const;
  double Probability(std::span<const uint64_t> ids) const;
  float Weight(uint64_t id) const;
  float Factor(uint64_t id, int k) const;
  const PlantedOptions& options() const { return o_; }

 private:
  // A standard normal number determined by (seed, id, salt).
  double Gaussian(uint64_t id, uint64_t salt) const;
  PlantedOptions o_;
};

}  // namespace ps::datagen
