// RunBatch: one batch through the model: gather its distinct keys, pull
// their rows (and the dense table, if the model has one), compute loss and
// predictions (and gradients when training), push the gradients. What
// training and evaluation threads both do, batch after batch, in the
// buffers of one BatchBuffers each.
//
// Thread-safe as the ParamStore is: each thread passes its own buffers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "worker/data/example_batch.h"
#include "worker/train/example_source.h"
#include "worker/train/feature_admission.h"
#include "worker/train/model.h"
#include "worker/train/param_store.h"

namespace ps::train {

// One thread's buffers, reused batch after batch.
struct BatchBuffers {
  ExampleSource::Scratch scratch;
  data::ExampleBatch batch;
  BatchKeys keys;
  std::vector<uint32_t> key_table;
  std::vector<float> rows, dense, probs;
  BatchGrads grads;
};

// The tables a model trains against.
struct ModelTables {
  uint32_t sparse_id = 0;
  uint32_t dense_id = 0;  // used when the model has dense weights
  // The sparse table's frequency admission; null when it has none.
  FeatureAdmission* admission = nullptr;
};

// Pulls, computes and (when training) pushes buffers->batch; returns the
// loss. With admission, the batch's rare ids are first replaced by their
// fields' OOV ids (training counts them, evaluation does not). When training
// and the loss or a prediction is not finite, *diverged says what ("loss is
// nan", "prediction 3 of 200 is nan") and nothing is pushed (so NaN never
// reaches the servers' rows or a checkpoint).
StatusOr<double> RunBatch(const Model& model, ParamStore* store,
                          const ModelTables& tables, bool train,
                          BatchBuffers* buffers, std::string* diverged);

// %g, but "nan" for any NaN (printf may say "-nan").
std::string FormatNumber(double x);

}  // namespace ps::train
