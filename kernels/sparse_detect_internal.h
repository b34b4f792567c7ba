// Pieces shared by sparse_detect.cc and its AVX2 twin: the block scanners.
//
// A scanner reads g[begin, end) once and writes the index of every selected
// entry (and, when `values` is not null, the entry itself) in increasing
// order at dst / values, returning how many it wrote. Compare and compaction
// are one pass without branches on the data: every group of 8 lanes stores
// its packed survivors whatever their number and the write position advances
// by the count, so a scanner may write up to kScanSlack entries past the
// ones it reports. The caller gives room for (end - begin) + kScanSlack.
// Callers keep end - begin <= kScanBlock, so dst is a small buffer that
// stays in L1 and the output grows by one copy of the survivors per block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ps::kernels::internal {

// Entries one scanner call covers at most (16 KiB of floats), and the room
// past the reported entries a scanner may scribble over.
inline constexpr size_t kScanBlock = 4096;
inline constexpr size_t kScanSlack = 8;

// The order key of |g|: the bits of |g| as an unsigned integer (which orders
// non-negative floats), with NaN mapped to 0 (ranked like zero).
inline uint32_t MagnitudeKey(uint32_t bits) {
  uint32_t key = bits & 0x7fffffff;
  return key > 0x7f800000 ? 0 : key;
}

// Selects i with |g[i]| >= eps (NaN never) / MagnitudeKey(g[i]) >= key.
size_t ScanGeEpsScalar(const float* g, size_t begin, size_t end, float eps,
                       uint32_t* dst, float* values);
size_t ScanGeEpsAvx2(const float* g, size_t begin, size_t end, float eps,
                     uint32_t* dst, float* values);
size_t ScanGeKeyScalar(const float* g, size_t begin, size_t end, uint32_t key,
                       uint32_t* dst, float* values);
size_t ScanGeKeyAvx2(const float* g, size_t begin, size_t end, uint32_t key,
                     uint32_t* dst, float* values);

}  // namespace ps::kernels::internal
