#include "kernels/checksum.h"

#include "kernels/cpu_features.h"

// The SSE2 path: xxHash inlined with this file's flags (x86-64's baseline).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ps::kernels {
namespace internal {

uint64_t Xxh3SeededSse2(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace internal

uint64_t Xxh3Seeded(const void* data, size_t size, uint64_t seed) {
  const CpuFeatures& cpu = ActiveCpuFeatures();
  if (cpu.avx512) return internal::Xxh3SeededAvx512(data, size, seed);
  if (cpu.avx2) return internal::Xxh3SeededAvx2(data, size, seed);
  return internal::Xxh3SeededSse2(data, size, seed);
}

}  // namespace ps::kernels
