#include "worker/train/fm_model.h"

namespace ps::train {

using ConstVec = Eigen::Map<const Eigen::VectorXf>;
using Vec = Eigen::Map<Eigen::VectorXf>;

double FmModel::Logit(const data::ExampleBatch& batch, const BatchKeys& keys,
                      const float* rows, uint32_t k, size_t e,
                      Eigen::VectorXf* sum_v) {
  const uint32_t dim = k + 1;
  const uint32_t begin = batch.offsets[e], end = batch.offsets[e + 1];
  double linear = rows[size_t{keys.bias_slot} * dim];
  double squares = 0;
  sum_v->setZero(k);
  for (uint32_t j = begin; j < end; ++j) {
    const float* row = rows + size_t{keys.slot[j]} * dim;
    const float x = batch.values[j];
    ConstVec v(row + 1, k);
    linear += x * row[0];
    sum_v->noalias() += x * v;
    squares += x * x * v.squaredNorm();
  }
  return linear + 0.5 * (sum_v->squaredNorm() - squares);
}

void FmModel::AddGradient(const data::ExampleBatch& batch,
                          const BatchKeys& keys, const float* rows, uint32_t k,
                          size_t e, const Eigen::VectorXf& sum_v, float d,
                          float* grad_rows) {
  const uint32_t dim = k + 1;
  const uint32_t begin = batch.offsets[e], end = batch.offsets[e + 1];
  grad_rows[size_t{keys.bias_slot} * dim] += d;
  for (uint32_t j = begin; j < end; ++j) {
    const size_t at = size_t{keys.slot[j]} * dim;
    const float x = batch.values[j];
    ConstVec v(rows + at + 1, k);
    grad_rows[at] += d * x;
    // d/dv_i of the pairwise term: x_i * (sum_v - x_i v_i).
    Vec(grad_rows + at + 1, k).noalias() += (d * x) * (sum_v - x * v);
  }
}

double FmModel::Compute(const data::ExampleBatch& batch, const BatchKeys& keys,
                        const BatchParams& params, std::span<float> probs,
                        BatchGrads* grads) const {
  const float* rows = params.rows.data();
  if (grads != nullptr) {
    grads->rows.assign(keys.keys.size() * sparse_dim(), 0.0f);
    grads->dense.clear();
  }
  Eigen::VectorXf sum_v(k_);
  double loss = 0;
  for (size_t e = 0; e < batch.size(); ++e) {
    double logit = Logit(batch, keys, rows, k_, e, &sum_v);
    probs[e] = Sigmoid(logit);
    loss += ExampleLogLoss(logit, batch.labels[e]);
    if (grads == nullptr) continue;
    AddGradient(batch, keys, rows, k_, e, sum_v, probs[e] - batch.labels[e],
                grads->rows.data());
  }
  if (grads != nullptr) {
    AddRowL2(keys, rows, sparse_dim(), l2_, grads->rows.data());
  }
  return loss;
}

}  // namespace ps::train
