// The deterministic values of the kv_transfer example's KV cache: every
// fp16 slot (held as uint16_t) has a value that depends on its place in the
// full cache (layer, K/V, token, head, dim) and a seed, so that decode can
// check every byte it receives, and a value that landed in the wrong place
// (another token, head, layer, or K for V) does not match.
//
// A row (layer, kv, token, head) gets a 64-bit hash of its index and the
// seed; its head_dim values are base + dim * step (mod 2^16) with base and
// an odd step taken from the hash, cheap to fill and check (the loops
// vectorize).
//
// Pure functions: thread-safe.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "examples/kv_transfer/kv_shape.h"

namespace ps::kv {

// Writes every value of `layer` into `layer_data`, a layer laid out for
// `heads` (RowOffset with layer 0: the layer's own start).
void FillLayer(const KvShape& shape, const HeadRange& heads, uint64_t layer,
               uint64_t seed, uint16_t* layer_data);

// OK when every value of `layer` in `layer_data` (laid out for `heads`) is
// the pattern's; else kCorruption naming the first wrong value's place, what
// it holds and what it should hold, and how many values of the layer differ.
Status CheckLayer(const KvShape& shape, const HeadRange& heads, uint64_t layer,
                  uint64_t seed, const uint16_t* layer_data);

}  // namespace ps::kv
