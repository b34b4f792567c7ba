// LEB128 varints for the row indices of a sparse packet: sizing, writing, and
// the fast reader the packet decoder runs over an untrusted index section
// (protocol/sparse_packet.h owns the format; this is the arithmetic).
//
// Pure functions over caller memory: thread-safe, allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace ps::kernels {

// Bytes of the varint of `v`: 0..127 -> 1, ..., >= 2^28 -> 5. Four
// compares rather than a bit scan, so that a loop summing the sizes of many
// deltas (the encoder cutting packets) vectorises.
inline size_t VarintBytes(uint32_t v) {
  return size_t{1} + (v >= (1u << 7)) + (v >= (1u << 14)) + (v >= (1u << 21)) +
         (v >= (1u << 28));
}

// Writes the varint of `v` at `p`; returns the byte after it.
inline uint8_t* PutVarint(uint8_t* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Writes the delta varints of rows[0..n) (the first as itself, then each
// row minus the one before; the caller checked they increase) at `p`;
// returns the byte after them. Where AVX-512 is active, sixteen deltas
// under 128 (the common case of a dense push) go out in one store.
uint8_t* PutDeltaVarints(const uint32_t* rows, size_t n, uint8_t* p);

// Reads one varint that is known to be well formed (its section was
// validated by DecodeDeltaVarints before) and advances `*p` past it.
inline uint32_t ReadValidatedVarint(const uint8_t** p) {
  uint32_t v = 0;
  int shift = 0;
  for (;;) {
    uint32_t b = *(*p)++;
    v |= (b & 0x7f) << shift;
    if (b < 0x80) return v;
    shift += 7;
  }
}

// What DecodeDeltaVarints learned about the indices.
struct DeltaVarintSummary {
  uint64_t last = 0;        // the last index (the largest when increasing)
  bool zero_delta = false;  // some delta after the first is 0
};

// Decodes `n` delta-coded indices (the first as itself) from `section`,
// which must end exactly after them at `bytes`; stores them in `out`
// (n entries) when kStore. Errors (Corruption): a varint over 32 bits, the
// section ending inside an index, bytes left after the last one.
template <bool kStore>
Status DecodeDeltaVarints(const uint8_t* section, size_t bytes, uint32_t n,
                          uint32_t* out, DeltaVarintSummary* summary);

}  // namespace ps::kernels
