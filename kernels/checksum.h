// Checksum: XXH3-64 with a seed, the hash of every sparse packet and of
// every checkpoint entry, computed with the widest vectors this CPU has.
// The digest is XXH3's own, the same bits on every path (xxHash specifies
// it, and kernels_checksum_test checks each path against libxxhash);
// only the speed differs: Debian's libxxhash is built for SSE2 (about 20
// GB/s a core here), the AVX-512 path runs about 2.5 times as fast.
//
// Thread-safe: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ps::kernels {

// XXH3_64bits_withSeed(data, size, seed), on the path ActiveCpuFeatures()
// picks (AVX-512, AVX2 or SSE2).
uint64_t Xxh3Seeded(const void* data, size_t size, uint64_t seed);

namespace internal {
// One path each, for the tests; call only where the CPU has the feature.
uint64_t Xxh3SeededSse2(const void* data, size_t size, uint64_t seed);
uint64_t Xxh3SeededAvx2(const void* data, size_t size, uint64_t seed);
uint64_t Xxh3SeededAvx512(const void* data, size_t size, uint64_t seed);
}  // namespace internal

}  // namespace ps::kernels
