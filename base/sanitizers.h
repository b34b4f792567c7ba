// Which sanitizer instruments the translation unit being compiled, asked the
// same way under GCC (which defines __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__) and clang (which answers __has_feature instead):
// PS_ASAN and PS_TSAN are 1 when it does, else undefined. Code that TSan
// cannot follow (transactional memory, non-temporal stores) and tests that
// scale their waits to an instrumented build's speed ask these.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PS_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define PS_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(PS_ASAN)
#define PS_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(PS_TSAN)
#define PS_TSAN 1
#endif
#endif
