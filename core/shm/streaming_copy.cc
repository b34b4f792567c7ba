#include "core/shm/streaming_copy.h"

#include <emmintrin.h>

#include <cstdint>
#include <cstring>

namespace ps::xfer::internal {

#if defined(__SANITIZE_THREAD__)

void StreamingCopy(void* dst, const void* src, size_t n) {
  std::memcpy(dst, src, n);
}
void StreamingFence() {}

#else

void StreamingCopy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // Ordinary stores up to the destination's next 16-byte boundary.
  const size_t head =
      std::min(n, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  // Four 16-byte streams a round: a whole 64-byte line when aligned.
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  for (; n >= 16; n -= 16, d += 16, s += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  }
  std::memcpy(d, s, n);
}

void StreamingFence() { _mm_sfence(); }

#endif

}  // namespace ps::xfer::internal
