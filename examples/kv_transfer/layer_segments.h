// The scatter-gather list of one layer's hand-off: per K/V and token, the
// decode side's head range of prefill's row, to its place in decode's
// cache. Pieces that continue the previous one on both sides merge (when
// decode holds every head, a layer is one segment), and the list is cut
// into operations of at most `max_segments` segments each (the tcp wire
// takes up to 65536 a request, core/stream/wire.h).
//
// Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/segment.h"
#include "examples/kv_transfer/kv_shape.h"

namespace ps::kv {

// Fills *out (cleared first) with the segments of `layer`: local addresses
// in `prefill_cache` (the whole cache, every head), remote offsets from
// `remote_base` (where decode's cache starts in its region), decode holding
// `heads`.
void LayerSegments(const KvShape& shape, const HeadRange& heads, uint64_t layer,
                   uint8_t* prefill_cache, uint64_t remote_base,
                   std::vector<xfer::Segment>* out);

// `segments` cut into consecutive pieces of at most `max_segments` (>= 1).
std::vector<std::span<const xfer::Segment>> SplitSegments(
    std::span<const xfer::Segment> segments, size_t max_segments);

}  // namespace ps::kv
