// Error feedback: what a step does not send is kept and added to the next
// step's gradient, so nothing is lost over time.
//
// Per step, entry by entry in fp32:
//   acc      = residual + gradient
//   rows     = detect(acc)                      (threshold or top-k rows)
//   sent     = RoundTrip(acc[rows], value type) (exactly what the receiver
//                                                decodes from the packets)
//   residual = acc - sent   (on sent rows; acc elsewhere)
// and sent + residual == acc holds EXACTLY in fp32 for every entry: the
// quantization error is representable (fp16/bf16 rounding, int8 by the
// Sterbenz argument in quantize.h), and where it would not be (an fp16 value
// saturated far beyond 65504) that entry is sent as 0 and kept whole.
// Hence, over steps, sum(sent) + residual == sum(gradients) up to the fp32
// rounding of the `residual + gradient` additions themselves (and exactly
// when those are exact, e.g. for dyadic values of bounded range).
//
// The values must be encoded with the selection's value_type and int8_block
// (EncodeSparsePackets cuts int8 packets on block borders, so per-packet
// quantization reproduces `sent` bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/quant_stats.h"
#include "kernels/quantize.h"
#include "kernels/sparse_detect.h"
#include "kernels/thread_pool.h"

namespace ps::kernels {

struct ErrorFeedbackOptions {
  size_t rows = 0;     // rows in the buffer
  size_t row_dim = 1;  // values per row
  enum class Selection { kThreshold, kTopK } selection = Selection::kThreshold;
  float epsilon = 0.0f;         // kThreshold: rows with norm >= epsilon
  size_t k = 0;                 // kTopK: the k rows of largest norm
  RowNorm norm = RowNorm::kL2;  // ignored when row_dim == 1 (|g|)
  ValueType value_type = ValueType::kFp32;
  uint32_t int8_block = kDefaultInt8Block;
  // Optional: where to record the quantization error of what is sent.
  QuantStats* stats = nullptr;
  uint32_t table_id = 0;  // the stats key
};

// What one step sends: rows in increasing order and their values as the
// receiver will decode them, row-major.
struct SparseSelection {
  std::vector<uint32_t> rows;
  std::vector<float> values;
  ValueType value_type = ValueType::kFp32;
  uint32_t int8_block = kDefaultInt8Block;
};

class ErrorFeedback {
 public:
  explicit ErrorFeedback(const ErrorFeedbackOptions& options);

  // Checks the options (rows * row_dim entries, at most 2^32 rows, ...).
  Status Validate() const;

  // One step (see the top of this file). gradient.size() must be
  // rows * row_dim. `out` is overwritten.
  Status Step(std::span<const float> gradient, ThreadPool* pool,
              SparseSelection* out);

  // Sends every row with a nonzero residual, in fp32 so nothing is left:
  // the residual is all zeros afterwards.
  Status Flush(ThreadPool* pool, SparseSelection* out);

  // kTopK: the k of the steps that follow (for a caller whose k follows
  // how many rows each step touched); the residual is kept.
  void set_k(size_t k) { options_.k = k; }

  std::span<const float> residual() const { return residual_; }
  const ErrorFeedbackOptions& options() const { return options_; }

 private:
  // Sends out->rows of residual_ as `type`, updating residual_. `gathered`:
  // out->values already holds those rows of residual_ (else Send copies
  // them).
  Status Send(ValueType type, bool gathered, SparseSelection* out);

  ErrorFeedbackOptions options_;
  std::vector<float> residual_;
  std::vector<float> scratch_;  // row norms
};

}  // namespace ps::kernels
