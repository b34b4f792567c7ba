#include "worker/train/deepfm_model.h"

#include <Eigen/Core>

#include "worker/train/fm_model.h"

namespace ps::train {
namespace {

using Matrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const Matrix>;
using MatrixMap = Eigen::Map<Matrix>;
using ConstRowVec = Eigen::Map<const Eigen::RowVectorXf>;
using RowVecMap = Eigen::Map<Eigen::RowVectorXf>;

}  // namespace

DeepFmModel::DeepFmModel(uint32_t k, uint32_t num_fields,
                         std::vector<uint32_t> hidden, L2Options l2)
    : k_(k), num_fields_(num_fields), l2_(l2) {
  widths_.push_back(num_fields * k);
  widths_.insert(widths_.end(), hidden.begin(), hidden.end());
  widths_.push_back(1);
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    dense_size_ += size_t{widths_[l]} * widths_[l + 1] + widths_[l + 1];
  }
}

double DeepFmModel::Compute(const data::ExampleBatch& batch,
                            const BatchKeys& keys, const BatchParams& params,
                            std::span<float> probs, BatchGrads* grads) const {
  const size_t n = batch.size();
  const uint32_t dim = k_ + 1;
  const float* rows = params.rows.data();
  const size_t layers = widths_.size() - 1;

  // Field embeddings, one row per example.
  Matrix input = Matrix::Zero(n, widths_[0]);
  for (size_t e = 0; e < n; ++e) {
    for (uint32_t j = batch.offsets[e]; j < batch.offsets[e + 1]; ++j) {
      const uint32_t f = batch.fields[j] % num_fields_;
      input.row(e).segment(size_t{f} * k_, k_).noalias() +=
          batch.values[j] *
          ConstRowVec(rows + size_t{keys.slot[j]} * dim + 1, k_);
    }
  }
  // Forward through the MLP, keeping each layer's activations.
  std::vector<Matrix> act(layers + 1);
  act[0] = std::move(input);
  size_t at = 0;
  std::vector<size_t> weight_at(layers);
  for (size_t l = 0; l < layers; ++l) {
    weight_at[l] = at;
    ConstMatrixMap w(params.dense.data() + at, widths_[l], widths_[l + 1]);
    at += size_t{widths_[l]} * widths_[l + 1];
    ConstRowVec b(params.dense.data() + at, widths_[l + 1]);
    at += widths_[l + 1];
    act[l + 1].noalias() = act[l] * w;
    act[l + 1].rowwise() += b;
    if (l + 1 < layers) act[l + 1] = act[l + 1].cwiseMax(0.0f);
  }

  if (grads != nullptr) {
    grads->rows.assign(keys.keys.size() * dim, 0.0f);
    grads->dense.assign(dense_size_, 0.0f);
  }
  Matrix delta(n, 1);  // dloss / dlogit
  Eigen::VectorXf sum_v(k_);
  double loss = 0;
  for (size_t e = 0; e < n; ++e) {
    double logit =
        FmModel::Logit(batch, keys, rows, k_, e, &sum_v) + act[layers](e, 0);
    probs[e] = Sigmoid(logit);
    loss += ExampleLogLoss(logit, batch.labels[e]);
    delta(e, 0) = probs[e] - batch.labels[e];
    if (grads != nullptr) {
      FmModel::AddGradient(batch, keys, rows, k_, e, sum_v, delta(e, 0),
                           grads->rows.data());
    }
  }
  if (grads == nullptr) return loss;

  // Backward through the MLP.
  for (size_t l = layers; l-- > 0;) {
    const size_t w_at = weight_at[l];
    const size_t b_at = w_at + size_t{widths_[l]} * widths_[l + 1];
    MatrixMap(grads->dense.data() + w_at, widths_[l], widths_[l + 1])
        .noalias() = act[l].transpose() * delta;
    RowVecMap(grads->dense.data() + b_at, widths_[l + 1]) =
        delta.colwise().sum();
    ConstMatrixMap w(params.dense.data() + w_at, widths_[l], widths_[l + 1]);
    Matrix below = delta * w.transpose();
    if (l > 0) {
      // ReLU: no gradient where the unit was off.
      below =
          below.cwiseProduct((act[l].array() > 0.0f).cast<float>().matrix());
    }
    delta = std::move(below);
  }
  // delta is now dloss / d(field embeddings): route it to the factors.
  for (size_t e = 0; e < n; ++e) {
    for (uint32_t j = batch.offsets[e]; j < batch.offsets[e + 1]; ++j) {
      const uint32_t f = batch.fields[j] % num_fields_;
      RowVecMap(grads->rows.data() + size_t{keys.slot[j]} * dim + 1, k_)
          .noalias() +=
          batch.values[j] * delta.row(e).segment(size_t{f} * k_, k_);
    }
  }
  AddRowL2(keys, rows, dim, l2_, grads->rows.data());
  return loss;
}

}  // namespace ps::train
