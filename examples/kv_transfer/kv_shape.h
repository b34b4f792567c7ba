// KvShape: the layout of a transformer's KV cache as the kv_transfer
// example holds it: layers x 2 (K, V) x tokens x heads x head_dim values of
// fp16 (2 bytes each), row-major. Prefill holds every head; decode holds a
// contiguous range of heads [begin, end), in the same order with only its
// heads in the innermost-but-one dimension, so that a layer's transfer is a
// scatter-gather of one contiguous head range per (K/V, token).
//
// Plain values and pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace ps::kv {

inline constexpr uint64_t kValueBytes = 2;  // fp16, held as uint16_t

struct KvShape {
  uint64_t layers = 0;
  uint64_t tokens = 0;
  uint64_t heads = 0;
  uint64_t head_dim = 0;

  bool operator==(const KvShape&) const = default;
};

// A contiguous range of heads [begin, end).
struct HeadRange {
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t count() const { return end - begin; }
  bool operator==(const HeadRange&) const = default;
};

// kInvalidArgument naming the field unless every dimension is at least 1,
// within its bound (layers <= 4096, tokens <= 2^24, heads <= 4096,
// head_dim <= 65536) and the whole cache is at most 1 TiB.
Status ValidateShape(const KvShape& shape);
// kInvalidArgument unless begin < end <= shape.heads.
Status ValidateHeads(const KvShape& shape, const HeadRange& heads);

// "32 layers x 2 x 16384 tokens x 8 heads x 128" (and " (heads 0..4)").
std::string ShapeString(const KvShape& shape);
std::string HeadsString(const HeadRange& heads);
// "1.00 GiB", "12.0 MiB", "384 KiB", "96 B".
std::string BytesString(uint64_t bytes);

// Bytes of one layer (K and V) holding `heads`, and of every layer.
uint64_t LayerBytes(const KvShape& shape, const HeadRange& heads);
uint64_t CacheBytes(const KvShape& shape, const HeadRange& heads);
// Every head of the shape.
inline HeadRange AllHeads(const KvShape& shape) { return {0, shape.heads}; }

// Byte offset of the row (layer, kv, token, head) -- head_dim values -- in a
// cache holding `heads` (head in [heads.begin, heads.end)).
inline uint64_t RowOffset(const KvShape& shape, const HeadRange& heads,
                          uint64_t layer, uint64_t kv, uint64_t token,
                          uint64_t head) {
  return (((layer * 2 + kv) * shape.tokens + token) * heads.count() +
          (head - heads.begin)) *
         shape.head_dim * kValueBytes;
}

}  // namespace ps::kv
