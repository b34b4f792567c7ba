// DeepFM (Guo et al. 2017): a factorization machine plus an MLP over the
// same embeddings, summed in the logit:
//   logit = FM(x) + MLP([e_0, e_1, ..., e_{F-1}])
// where e_f = sum of x_i v_i over the example's features in field f (a
// feature of field f >= F counts as field f mod F), so the MLP sees a fixed
// F * k input whatever the data format. Hidden layers use ReLU; the output
// layer is linear with one unit.
//
// Sparse rows are the FM's [w, v_1 .. v_k]. The MLP lives in one DENSE table
// pulled and pushed whole per batch, laid out layer after layer as
//   W_l (rows = inputs, columns = outputs, row-major), then b_l.
#pragma once

#include <vector>

#include "worker/train/model.h"

namespace ps::train {

class DeepFmModel : public Model {
 public:
  DeepFmModel(uint32_t k, uint32_t num_fields, std::vector<uint32_t> hidden,
              L2Options l2 = {});
  std::string name() const override { return "deepfm"; }
  uint32_t sparse_dim() const override { return 1 + k_; }
  size_t dense_size() const override { return dense_size_; }
  double Compute(const data::ExampleBatch& batch, const BatchKeys& keys,
                 const BatchParams& params, std::span<float> probs,
                 BatchGrads* grads) const override;

 private:
  uint32_t k_;
  uint32_t num_fields_;
  std::vector<uint32_t> widths_;  // input, hidden..., 1
  size_t dense_size_ = 0;
  L2Options l2_;  // of the sparse rows; the MLP is not regularised
};

}  // namespace ps::train
