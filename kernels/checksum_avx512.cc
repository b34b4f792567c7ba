// XXH3 compiled with -mavx512f (see CMakeLists.txt): xxHash picks its
// AVX-512 loop from the compiler's macros.
// xxhash.h includes <immintrin.h>: first through the header that silences
// GCC 12's false warning on it.
#include "kernels/avx512_intrinsics.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kernels/checksum.h"

namespace ps::kernels::internal {

uint64_t Xxh3SeededAvx512(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace ps::kernels::internal
