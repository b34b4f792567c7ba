// Factorization machine (Rendle 2010) over hashed features:
//   logit = w[bias] + sum_i x_i w_i + sum_{i<j} x_i x_j <v_i, v_j>
// with the pairwise sum computed in O(n k) as
//   1/2 * sum_f [ (sum_i x_i v_if)^2 - sum_i x_i^2 v_if^2 ].
// One sparse row per key of dim 1 + k: [w, v_1 .. v_k] (the bias row uses w
// only).
#pragma once

#include <Eigen/Core>

#include "worker/train/model.h"

namespace ps::train {

class FmModel : public Model {
 public:
  FmModel(uint32_t k, L2Options l2 = {}) : k_(k), l2_(l2) {}
  std::string name() const override { return "fm"; }
  uint32_t sparse_dim() const override { return 1 + k_; }
  double Compute(const data::ExampleBatch& batch, const BatchKeys& keys,
                 const BatchParams& params, std::span<float> probs,
                 BatchGrads* grads) const override;

  // The FM logit of example e and, in *sum_v, sum_i x_i v_i (k floats):
  // shared with DeepFM.
  static double Logit(const data::ExampleBatch& batch, const BatchKeys& keys,
                      const float* rows, uint32_t k, size_t e,
                      Eigen::VectorXf* sum_v);
  // Adds d * dlogit/d(row) of example e into grad rows.
  static void AddGradient(const data::ExampleBatch& batch,
                          const BatchKeys& keys, const float* rows, uint32_t k,
                          size_t e, const Eigen::VectorXf& sum_v, float d,
                          float* grad_rows);

 private:
  uint32_t k_;
  L2Options l2_;
};

}  // namespace ps::train
