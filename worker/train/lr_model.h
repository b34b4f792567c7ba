// Logistic regression over hashed features:
//   logit = w[bias] + sum_i x_i * w[id_i],   p = sigmoid(logit)
// One sparse row per key, of dim 1; L2Options::w regularises it.
#pragma once

#include "worker/train/model.h"

namespace ps::train {

class LrModel : public Model {
 public:
  explicit LrModel(L2Options l2 = {}) : l2_(l2) {}
  std::string name() const override { return "lr"; }
  uint32_t sparse_dim() const override { return 1; }
  double Compute(const data::ExampleBatch& batch, const BatchKeys& keys,
                 const BatchParams& params, std::span<float> probs,
                 BatchGrads* grads) const override;

 private:
  L2Options l2_;
};

}  // namespace ps::train
