// XXH3 compiled with -mavx2 (see CMakeLists.txt): xxHash picks its
// AVX2 loop from the compiler's macros.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kernels/checksum.h"

namespace ps::kernels::internal {

uint64_t Xxh3SeededAvx2(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace ps::kernels::internal
