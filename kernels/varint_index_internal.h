// The two decoders behind DecodeDeltaVarints (varint_index.h), exposed so
// tests can compare them directly (ActiveCpuFeatures() picks one for the
// whole process). Both work on a cursor so that one can take over where the
// other stopped: the AVX2 one decodes the bulk, the scalar one the first index,
// the rare long varints and the end of the section with all its checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace ps::kernels::internal {

// PutDeltaVarints' two writers, exposed so tests compare them; the second
// needs AVX-512 F.
uint8_t* PutDeltaVarintsScalar(const uint32_t* rows, size_t n, uint8_t* p);
uint8_t* PutDeltaVarintsAvx512(const uint32_t* rows, size_t n, uint8_t* p);

// Where a decode stands: the next byte, the indices done, the running row
// (the sum of the deltas so far, exact in 64 bits) and whether some delta
// after the first was 0; and, for messages, the section and its index count.
struct VarintCursor {
  const uint8_t* section = nullptr;
  uint32_t total = 0;
  const uint8_t* p = nullptr;
  uint32_t done = 0;
  uint64_t row = 0;
  bool zero_delta = false;
};

// Decodes indices [cur->done, until) one varint at a time, checking each
// (Corruption: a varint over 32 bits, `end` reached inside an index),
// storing them in out[] when kStore.
template <bool kStore>
Status DecodeVarintsScalar(const uint8_t* end, uint32_t until, uint32_t* out,
                           VarintCursor* cur);

// Decodes as many indices of [cur->done, n) as it can eight bytes at a
// time; stops early (leaving the rest to the scalar decoder) at a varint of
// three bytes or more, within 8 bytes of `end` or 8 indices of n. Needs
// cur->done >= 1 (the first index may be 0, a later delta may not) and
// AVX2. Everything it decodes is valid by construction (one- and two-byte
// varints cannot overflow); it notes zero deltas in the cursor.
void DecodeVarintsAvx2(const uint8_t* end, uint32_t n, uint32_t* out,
                       VarintCursor* cur);

}  // namespace ps::kernels::internal
