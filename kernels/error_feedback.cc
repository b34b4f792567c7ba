#include "kernels/error_feedback.h"

#include <cstring>
#include <limits>
#include <string>

namespace ps::kernels {

ErrorFeedback::ErrorFeedback(const ErrorFeedbackOptions& options)
    : options_(options) {
  if (Validate().ok()) residual_.assign(options_.rows * options_.row_dim, 0.0f);
}

Status ErrorFeedback::Validate() const {
  if (options_.row_dim == 0) return InvalidArgument("row_dim must be >= 1");
  if (options_.rows > kMaxDetectEntries)
    return OutOfRange(std::to_string(options_.rows) +
                      " rows exceed the 2^32 a uint32 index addresses");
  if (!IsValidValueType(static_cast<uint8_t>(options_.value_type)))
    return InvalidArgument("unknown value type");
  if (options_.value_type == ValueType::kInt8 && options_.int8_block == 0)
    return InvalidArgument("int8_block must be >= 1");
  if (options_.selection == ErrorFeedbackOptions::Selection::kThreshold &&
      !(options_.epsilon >= 0.0f))
    return InvalidArgument("epsilon must be >= 0");
  return Status::OK();
}

Status ErrorFeedback::Step(std::span<const float> gradient, ThreadPool* pool,
                           SparseSelection* out) {
  out->rows.clear();
  out->values.clear();
  PS_RETURN_IF_ERROR(Validate());
  if (gradient.size() != residual_.size())
    return InvalidArgument("gradient has " + std::to_string(gradient.size()) +
                           " values, the buffer " +
                           std::to_string(residual_.size()));
  float* acc = residual_.data();
  const float* g = gradient.data();
  ParallelFor(pool, residual_.size(), size_t{1} << 16,
              [&](size_t b, size_t e, int) {
                for (size_t i = b; i < e; ++i) acc[i] += g[i];
              });
  const size_t dim = options_.row_dim;
  const bool threshold =
      options_.selection == ErrorFeedbackOptions::Selection::kThreshold;
  if (dim == 1 && threshold) {
    // The scan hands out the values with the indices: no second, scattered
    // read of the residual to gather them.
    PS_RETURN_IF_ERROR(DetectThreshold(residual_, options_.epsilon, pool,
                                       &out->rows, &out->values));
    return Send(options_.value_type, /*gathered=*/true, out);
  }
  if (dim == 1) {
    PS_RETURN_IF_ERROR(DetectTopK(residual_, options_.k, pool, &out->rows));
  } else {
    PS_RETURN_IF_ERROR(
        threshold
            ? DetectRowsThreshold(residual_, dim, options_.norm,
                                  options_.epsilon, pool, &out->rows, &scratch_)
            : DetectRowsTopK(residual_, dim, options_.norm, options_.k, pool,
                             &out->rows, &scratch_));
  }
  return Send(options_.value_type, /*gathered=*/false, out);
}

Status ErrorFeedback::Flush(ThreadPool* pool, SparseSelection* out) {
  out->rows.clear();
  out->values.clear();
  PS_RETURN_IF_ERROR(Validate());
  // Any nonzero entry (the smallest subnormal is the least nonzero |v|).
  const float tiny = std::numeric_limits<float>::denorm_min();
  if (options_.row_dim == 1) {
    PS_RETURN_IF_ERROR(DetectThreshold(residual_, tiny, pool, &out->rows));
  } else {
    PS_RETURN_IF_ERROR(DetectRowsThreshold(residual_, options_.row_dim,
                                           RowNorm::kMaxAbs, tiny, pool,
                                           &out->rows, &scratch_));
  }
  return Send(ValueType::kFp32, /*gathered=*/false, out);
}

Status ErrorFeedback::Send(ValueType type, bool gathered,
                           SparseSelection* out) {
  const size_t dim = options_.row_dim;
  const size_t n = out->rows.size() * dim;
  out->value_type = type;
  out->int8_block = options_.int8_block;
  if (!gathered) {
    out->values.resize(n);
    for (size_t r = 0; r < out->rows.size(); ++r)
      std::memcpy(out->values.data() + r * dim,
                  residual_.data() + size_t{out->rows[r]} * dim,
                  dim * sizeof(float));
  }
  if (out->values.size() != n)
    return Internal("error feedback: " + std::to_string(out->values.size()) +
                    " values gathered for " + std::to_string(n));
  float* sent = out->values.data();
  // The original values, for the stats, before they are replaced.
  std::vector<float> original;
  if (options_.stats != nullptr && options_.stats->enabled() &&
      type != ValueType::kFp32)
    original.assign(sent, sent + n);
  RoundTrip(type, sent, n, options_.int8_block, sent);

  // First check that every residual is exact, then write: an error leaves
  // the buffer as it was.
  for (size_t r = 0; r < out->rows.size(); ++r) {
    const float* acc = residual_.data() + size_t{out->rows[r]} * dim;
    for (size_t j = 0; j < dim; ++j) {
      float v = sent[r * dim + j];
      float rest = acc[j] - v;
      if (v + rest == acc[j]) continue;
      if (type == ValueType::kInt8) {
        return Internal("int8 residual of row " + std::to_string(out->rows[r]) +
                        " is not exact; quantize.h promises it is");
      }
      sent[r * dim + j] = 0.0f;  // e.g. fp16 saturated far out: keep it all
    }
  }
  if (!original.empty())
    options_.stats->Record(options_.table_id, type, original, out->values);
  for (size_t r = 0; r < out->rows.size(); ++r) {
    float* acc = residual_.data() + size_t{out->rows[r]} * dim;
    for (size_t j = 0; j < dim; ++j) acc[j] -= sent[r * dim + j];
  }
  return Status::OK();
}

}  // namespace ps::kernels
