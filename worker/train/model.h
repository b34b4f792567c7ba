// Model: a CTR model's math over one mini-batch, apart from where its
// parameters live. The trainer gathers the batch's distinct feature keys
// (BatchKeys), pulls their rows from the sparse table and, for models with
// an MLP, the whole dense table, calls Compute, and pushes the gradients
// back. Models are stateless (const, thread-safe): one instance serves every
// trainer thread.
//
// The loss is the SUM of the examples' logloss, and gradients are of that
// sum: a feature seen in k examples gets k examples' worth of gradient, which
// is what adaptive optimizers (Adagrad, FTRL) on the servers expect.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "worker/data/example_batch.h"

namespace ps::train {

// The key of the bias row every model keeps in its sparse table.
inline constexpr uint64_t kBiasKey = 0xb1a5b1a5b1a5b1a5ULL;

// The distinct keys of a batch: keys[slot[j]] == batch.ids[j], and
// keys[bias_slot] == kBiasKey.
struct BatchKeys {
  std::vector<uint64_t> keys;
  std::vector<uint32_t> slot;  // per feature occurrence of the batch
  uint32_t bias_slot = 0;
};

// Fills *out for `batch`; reuses out's memory (keep one per thread).
void GatherBatchKeys(const data::ExampleBatch& batch, BatchKeys* out,
                     std::vector<uint32_t>* scratch);

// Parameters of one batch as the model reads them.
struct BatchParams {
  std::span<const float> rows;   // keys.size() x sparse_dim
  std::span<const float> dense;  // dense_size() floats (empty: none)
};

// Gradients of the summed loss, shaped like BatchParams.
struct BatchGrads {
  std::vector<float> rows;
  std::vector<float> dense;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  // Floats per sparse-table row the model needs.
  virtual uint32_t sparse_dim() const = 0;
  // Floats of the dense table the model needs (0: none).
  virtual size_t dense_size() const { return 0; }

  // Computes the click probability of every example into probs
  // (batch.size()) and returns the summed logloss. With grads non-null, also
  // fills it (resized here) with the gradients of that loss.
  virtual double Compute(const data::ExampleBatch& batch, const BatchKeys& keys,
                         const BatchParams& params, std::span<float> probs,
                         BatchGrads* grads) const = 0;
};

// L2 regularisation of the sparse rows a batch touches: each distinct row of
// the batch (not the bias) gets lambda * row added to its gradient once per
// batch, i.e. the batch's loss carries lambda/2 * |row|^2 for every row it
// uses. Rows seen in few batches (rare features, whose few examples are easy
// to fit by chance) are pulled towards 0 relative to their data gradient;
// frequent ones barely notice. w and the FM factors v get their own lambda.
struct L2Options {
  float w = 0.0f;  // the linear weight, column 0 of a row
  float v = 0.0f;  // the factors, columns 1 .. k (fm, deepfm)
};

// A worker's part of the L2 of a step that `workers` workers share, each
// pushing the gradient of its share of the batch: lambda / workers. The
// servers sum a step's pushes (and a bsp job's fold them into one update:
// server/shard.h), so a row every share uses gets lambda once per step, as
// with --local; lambda on every push would regularise the rows used most N
// times as hard (the demo's 2-worker FM: 0.0026 AUC).
L2Options L2ShareOfStep(const L2Options& per_step, uint32_t workers);

// Adds the L2 gradient of every row in `keys` except the bias to grad_rows
// (keys.size() x dim, dim = 1 + number of factors).
void AddRowL2(const BatchKeys& keys, const float* rows, uint32_t dim,
              const L2Options& l2, float* grad_rows);

struct ModelOptions {
  std::string name = "lr";                  // lr, fm, deepfm
  uint32_t fm_dim = 8;                      // factor length k (fm, deepfm)
  L2Options l2;                             // 0: none
  uint32_t num_fields = 39;                 // deepfm: fields of the MLP input
  std::vector<uint32_t> hidden = {64, 32};  // deepfm: MLP hidden layers
};

// Bounds of the model's sizes, far above useful settings, low enough that
// no Compute call of a sane batch runs out of memory: MakeModel checks them
// before anything is sized by them.
inline constexpr uint32_t kMaxFmDim = 256;
inline constexpr uint32_t kMaxNumFields = 1024;
inline constexpr uint32_t kMaxHiddenWidth = 4096;
inline constexpr uint64_t kMaxMlpInput = 65536;               // fields x fm_dim
inline constexpr uint64_t kMaxDenseSize = uint64_t{1} << 26;  // MLP floats

// kInvalidArgument for an unknown name or bad sizes (naming the flag).
StatusOr<std::unique_ptr<Model>> MakeModel(const ModelOptions& options);

// The logloss of one example, probabilities clipped as in metrics.h, and a
// numerically stable sigmoid.
double ExampleLogLoss(double logit, float label);
float Sigmoid(double logit);

}  // namespace ps::train
