// StreamingCopy: memcpy with non-temporal stores, for the shm transport's
// large scatter-gather writes. A WriteV of many small segments (a KV cache's
// head slices: 1 KiB each) goes through memcpy one segment at a time, and
// memcpy picks ordinary stores for small sizes: every destination line is
// first read for ownership, then written back, half again the memory traffic
// of a plain large memcpy (which glibc does with non-temporal stores past a
// threshold). Streaming stores skip the read and leave the caches to the
// reader's other data.
//
// Stores are weakly ordered until StreamingFence: call it after the last
// StreamingCopy of an operation, before anything that must be seen after the
// data (a notify word, the operation's completion).
//
// Thread-safe: stateless. Under ThreadSanitizer the copy is a plain memcpy,
// which the race detector sees.
#pragma once

#include <cstddef>

namespace ps::xfer::internal {

// Operations at least this large (all segments together) stream.
inline constexpr size_t kStreamingCopyBytes = 256 * 1024;
// How far ahead the copier prefetches sources: the segment this many after
// the one it copies, up to kStreamingPrefetchBytes of it. Sources of a
// scatter-gather write are often strided (a head range out of every
// token's heads), which the hardware prefetcher follows poorly: measured
// here, a 1 KiB-of-2 KiB pattern copied at 9.4 GB/s with streaming stores
// alone and at 15 GB/s with this (a plain contiguous memcpy: 18).
inline constexpr size_t kStreamingPrefetchAhead = 4;
inline constexpr size_t kStreamingPrefetchBytes = 1024;

// AVX2 streams where the CPU has them, else a plain memcpy.
void StreamingCopy(void* dst, const void* src, size_t n);
// Asks for the first kStreamingPrefetchBytes of a later source.
void StreamingPrefetch(const void* src, size_t n);
void StreamingFence();

}  // namespace ps::xfer::internal
