#include "worker/train/lr_model.h"

namespace ps::train {

double LrModel::Compute(const data::ExampleBatch& batch, const BatchKeys& keys,
                        const BatchParams& params, std::span<float> probs,
                        BatchGrads* grads) const {
  const float* w = params.rows.data();
  float* g = nullptr;
  if (grads != nullptr) {
    grads->rows.assign(keys.keys.size(), 0.0f);
    grads->dense.clear();
    g = grads->rows.data();
  }
  double loss = 0;
  for (size_t e = 0; e < batch.size(); ++e) {
    const uint32_t begin = batch.offsets[e], end = batch.offsets[e + 1];
    double logit = w[keys.bias_slot];
    for (uint32_t j = begin; j < end; ++j) {
      logit += batch.values[j] * w[keys.slot[j]];
    }
    probs[e] = Sigmoid(logit);
    loss += ExampleLogLoss(logit, batch.labels[e]);
    if (g == nullptr) continue;
    const float d = probs[e] - batch.labels[e];  // dloss / dlogit
    g[keys.bias_slot] += d;
    for (uint32_t j = begin; j < end; ++j) {
      g[keys.slot[j]] += d * batch.values[j];
    }
  }
  if (g != nullptr) AddRowL2(keys, w, 1, l2_, g);
  return loss;
}

}  // namespace ps::train
