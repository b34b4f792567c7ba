#include "core/shm/streaming_copy.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/sanitizers.h"

namespace ps::xfer::internal {

#if defined(PS_TSAN)

void StreamingCopy(void* dst, const void* src, size_t n) {
  std::memcpy(dst, src, n);
}
void StreamingPrefetch(const void*, size_t) {}
void StreamingFence() {}

#else

namespace {

// 32-byte streams, two a round: a whole line once dst is aligned (ordinary
// stores up to its next 32-byte boundary, and for the tail).
[[gnu::target("avx2")]] void CopyAvx2(uint8_t* d, const uint8_t* s, size_t n) {
  const size_t head =
      std::min(n, (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32);
  std::memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
  }
  std::memcpy(d, s, n);
}

bool HaveAvx2() {
  // The CPU does not change: asked once.
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return have;
}

}  // namespace

void StreamingCopy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  if (HaveAvx2()) {
    CopyAvx2(d, s, n);
  } else {
    std::memcpy(d, s, n);
  }
}

void StreamingPrefetch(const void* src, size_t n) {
  const auto* s = static_cast<const char*>(src);
  const size_t lines = std::min<size_t>(n, kStreamingPrefetchBytes) / 64;
  for (size_t i = 0; i < lines; ++i) _mm_prefetch(s + i * 64, _MM_HINT_T0);
}

void StreamingFence() { _mm_sfence(); }

#endif

}  // namespace ps::xfer::internal
