// Segment: one piece of a scatter-gather list (Endpoint::WriteV/ReadV), in
// its own header so the internal operation type (core/internal/op.h) needs
// no Endpoint. A plain value; no ownership of `local`.
//
// Thread-safety: a plain value; the bytes at `local` must not change (for
// WriteV) or be read (for ReadV) until the operation completes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ps::xfer {

// `length` bytes at local address `local` and at `remote_offset` inside the
// remote region.
struct Segment {
  void* local;
  uint64_t remote_offset;
  size_t length;
};

}  // namespace ps::xfer
