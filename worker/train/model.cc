#include "worker/train/model.h"

#include <algorithm>
#include <cmath>

#include "client/distinct_keys.h"
#include "worker/train/deepfm_model.h"
#include "worker/train/fm_model.h"
#include "worker/train/lr_model.h"

namespace ps::train {

void GatherBatchKeys(const data::ExampleBatch& batch, BatchKeys* out,
                     std::vector<uint32_t>* scratch) {
  worker::DistinctKeys distinct(batch.ids.size() + 1, scratch, &out->keys);
  out->slot.resize(batch.ids.size());
  out->bias_slot = distinct.Insert(kBiasKey);
  for (size_t j = 0; j < batch.ids.size(); ++j) {
    out->slot[j] = distinct.Insert(batch.ids[j]);
  }
}

L2Options L2ShareOfStep(const L2Options& per_step, uint32_t workers) {
  if (workers <= 1) return per_step;
  return {per_step.w / static_cast<float>(workers),
          per_step.v / static_cast<float>(workers)};
}

void AddRowL2(const BatchKeys& keys, const float* rows, uint32_t dim,
              const L2Options& l2, float* grad_rows) {
  if (l2.w == 0.0f && l2.v == 0.0f) return;
  for (size_t r = 0; r < keys.keys.size(); ++r) {
    if (r == keys.bias_slot) continue;
    const float* row = rows + r * dim;
    float* grad = grad_rows + r * dim;
    grad[0] += l2.w * row[0];
    for (uint32_t c = 1; c < dim; ++c) grad[c] += l2.v * row[c];
  }
}

float Sigmoid(double logit) {
  if (logit >= 0) return static_cast<float>(1.0 / (1.0 + std::exp(-logit)));
  double e = std::exp(logit);
  return static_cast<float>(e / (1.0 + e));
}

double ExampleLogLoss(double logit, float label) {
  // log(1 + e^z) - y z, stable for large |z|.
  double softplus = logit > 0 ? logit + std::log1p(std::exp(-logit))
                              : std::log1p(std::exp(logit));
  return softplus - label * logit;
}

StatusOr<std::unique_ptr<Model>> MakeModel(const ModelOptions& options) {
  // Infinite strengths would turn every row into NaN at the first push.
  if (!std::isfinite(options.l2.w) || !(options.l2.w >= 0.0f) ||
      !std::isfinite(options.l2.v) || !(options.l2.v >= 0.0f)) {
    return InvalidArgument(
        "L2 strengths (--l2_w, --l2_v) must be finite and "
        ">= 0");
  }
  if (options.name == "lr") {
    return std::unique_ptr<Model>(new LrModel(options.l2));
  }
  if (options.fm_dim < 1 || options.fm_dim > kMaxFmDim) {
    return InvalidArgument("--fm_dim must be in [1, " +
                           std::to_string(kMaxFmDim) + "], not " +
                           std::to_string(options.fm_dim));
  }
  if (options.name == "fm") {
    return std::unique_ptr<Model>(new FmModel(options.fm_dim, options.l2));
  }
  if (options.name == "deepfm") {
    if (options.num_fields < 1 || options.num_fields > kMaxNumFields) {
      return InvalidArgument("--num_fields must be in [1, " +
                             std::to_string(kMaxNumFields) + "], not " +
                             std::to_string(options.num_fields));
    }
    const uint64_t input = uint64_t{options.num_fields} * options.fm_dim;
    if (input > kMaxMlpInput) {
      return InvalidArgument(
          "deepfm: the MLP input, --num_fields x --fm_dim = " +
          std::to_string(input) + ", must be at most " +
          std::to_string(kMaxMlpInput));
    }
    uint64_t weights = 0, below = input;
    for (uint32_t h : options.hidden) {
      if (h < 1 || h > kMaxHiddenWidth) {
        return InvalidArgument("--hidden: layer widths must be in [1, " +
                               std::to_string(kMaxHiddenWidth) + "], not " +
                               std::to_string(h));
      }
      weights += below * h + h;
      below = h;
    }
    weights += below + 1;
    if (weights > kMaxDenseSize) {
      return InvalidArgument(
          "deepfm: --num_fields, --fm_dim and --hidden make an MLP of " +
          std::to_string(weights) + " weights; at most " +
          std::to_string(kMaxDenseSize));
    }
    return std::unique_ptr<Model>(new DeepFmModel(
        options.fm_dim, options.num_fields, options.hidden, options.l2));
  }
  return InvalidArgument("unknown model '" + options.name +
                         "' (lr, fm, deepfm)");
}

}  // namespace ps::train
