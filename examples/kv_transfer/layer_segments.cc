// One layer's scatter-gather list, merged and cut (layer_segments.h).
#include "examples/kv_transfer/layer_segments.h"

#include <algorithm>

namespace ps::kv {

void LayerSegments(const KvShape& shape, const HeadRange& heads, uint64_t layer,
                   uint8_t* prefill_cache, uint64_t remote_base,
                   std::vector<xfer::Segment>* out) {
  out->clear();
  const HeadRange all = AllHeads(shape);
  const uint64_t length = heads.count() * shape.head_dim * kValueBytes;
  for (uint64_t kv = 0; kv < 2; ++kv) {
    for (uint64_t t = 0; t < shape.tokens; ++t) {
      uint8_t* local =
          prefill_cache + RowOffset(shape, all, layer, kv, t, heads.begin);
      const uint64_t remote =
          remote_base + RowOffset(shape, heads, layer, kv, t, heads.begin);
      if (!out->empty()) {
        xfer::Segment& last = out->back();
        if (static_cast<uint8_t*>(last.local) + last.length == local &&
            last.remote_offset + last.length == remote) {
          last.length += length;
          continue;
        }
      }
      out->push_back({local, remote, length});
    }
  }
}

std::vector<std::span<const xfer::Segment>> SplitSegments(
    std::span<const xfer::Segment> segments, size_t max_segments) {
  std::vector<std::span<const xfer::Segment>> pieces;
  const size_t step = std::max<size_t>(1, max_segments);
  for (size_t i = 0; i < segments.size(); i += step) {
    pieces.push_back(segments.subspan(i, std::min(step, segments.size() - i)));
  }
  return pieces;
}

}  // namespace ps::kv
