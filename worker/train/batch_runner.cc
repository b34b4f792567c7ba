#include "worker/train/batch_runner.h"

#include <cmath>
#include <cstdio>
#include <span>

#include "worker/eval/metrics.h"

namespace ps::train {

std::string FormatNumber(double x) {
  if (std::isnan(x)) return "nan";  // printf may say "-nan"
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

namespace {

// What is not finite in a batch's result ("loss is nan", "prediction 3 of
// 200 is nan"), or "" when all is finite. A non-finite loss or prediction
// means the parameters have diverged (or hold NaN already): training on
// would only spread NaN through every row it touches, and no metric of it
// means anything.
std::string NonFinite(double loss, std::span<const float> probs) {
  if (!std::isfinite(loss)) return "loss is " + FormatNumber(loss);
  const size_t i = eval::FirstNonFinite(probs);
  if (i < probs.size()) {
    return "prediction " + std::to_string(i + 1) + " of " +
           std::to_string(probs.size()) + " is " + FormatNumber(probs[i]);
  }
  return "";
}

}  // namespace

StatusOr<double> RunBatch(const Model& model, ParamStore* store,
                          const ModelTables& tables, bool train,
                          BatchBuffers* st, std::string* diverged) {
  if (tables.admission != nullptr) {
    if (train) {
      tables.admission->MapTraining(&st->batch);
    } else {
      tables.admission->MapForEval(&st->batch);
    }
  }
  GatherBatchKeys(st->batch, &st->keys, &st->key_table);
  st->rows.resize(st->keys.keys.size() * model.sparse_dim());
  PS_RETURN_IF_ERROR(store->Pull(tables.sparse_id, st->keys.keys, st->rows));
  if (model.dense_size() > 0) {
    st->dense.resize(model.dense_size());
    PS_RETURN_IF_ERROR(store->PullDense(tables.dense_id, st->dense));
  }
  st->probs.resize(st->batch.size());
  BatchParams params{st->rows, st->dense};
  double loss = model.Compute(st->batch, st->keys, params, st->probs,
                              train ? &st->grads : nullptr);
  if (train) {
    *diverged = NonFinite(loss, st->probs);
    if (!diverged->empty()) return loss;
    PS_RETURN_IF_ERROR(
        store->Push(tables.sparse_id, st->keys.keys, st->grads.rows));
    if (model.dense_size() > 0) {
      PS_RETURN_IF_ERROR(store->PushDense(tables.dense_id, st->grads.dense));
    }
  }
  return loss;
}

}  // namespace ps::train
