// KvShape: validation, sizes and names of a KV cache layout (kv_shape.h).
#include "examples/kv_transfer/kv_shape.h"

#include <cstdio>

namespace ps::kv {
namespace {

Status CheckDim(const char* name, uint64_t value, uint64_t max) {
  if (value < 1 || value > max) {
    return InvalidArgument(std::string(name) + " must be in [1, " +
                           std::to_string(max) + "], not " +
                           std::to_string(value));
  }
  return Status::OK();
}

}  // namespace

Status ValidateShape(const KvShape& shape) {
  PS_RETURN_IF_ERROR(CheckDim("layers", shape.layers, 4096));
  PS_RETURN_IF_ERROR(CheckDim("tokens", shape.tokens, uint64_t{1} << 24));
  PS_RETURN_IF_ERROR(CheckDim("heads", shape.heads, 4096));
  PS_RETURN_IF_ERROR(CheckDim("head_dim", shape.head_dim, 65536));
  // One layer's bytes are at most 2^37 rows x 2^17 bytes = 2^54 (no
  // overflow); the layers are compared by division.
  const uint64_t limit = uint64_t{1} << 40;
  const uint64_t per_layer_rows = 2 * shape.tokens * shape.heads;  // <= 2^37
  const uint64_t row_bytes = shape.head_dim * kValueBytes;         // <= 2^17
  if (per_layer_rows > limit / row_bytes ||
      shape.layers > limit / (per_layer_rows * row_bytes)) {
    return InvalidArgument("a cache of " + ShapeString(shape) +
                           " values is larger than 1 TiB");
  }
  return Status::OK();
}

Status ValidateHeads(const KvShape& shape, const HeadRange& heads) {
  if (heads.begin >= heads.end || heads.end > shape.heads) {
    return InvalidArgument("the head range [" + std::to_string(heads.begin) +
                           ", " + std::to_string(heads.end) +
                           ") is not a non-empty range within the " +
                           std::to_string(shape.heads) + " heads");
  }
  return Status::OK();
}

std::string ShapeString(const KvShape& shape) {
  return std::to_string(shape.layers) + " layers x 2 x " +
         std::to_string(shape.tokens) + " tokens x " +
         std::to_string(shape.heads) + " heads x " +
         std::to_string(shape.head_dim);
}

std::string HeadsString(const HeadRange& heads) {
  return "heads [" + std::to_string(heads.begin) + ", " +
         std::to_string(heads.end) + ")";
}

std::string BytesString(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / 1073741824.0);
  } else if (bytes >= (1 << 20)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof(buf), "%.0f KiB", bytes / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%llu B",
                  static_cast<unsigned long long>(bytes));
  }
  return buf;
}

uint64_t LayerBytes(const KvShape& shape, const HeadRange& heads) {
  return 2 * shape.tokens * heads.count() * shape.head_dim * kValueBytes;
}

uint64_t CacheBytes(const KvShape& shape, const HeadRange& heads) {
  return shape.layers * LayerBytes(shape, heads);
}

}  // namespace ps::kv
