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

void StreamingCopy(void* dst, const void* src, size_t n);
void StreamingFence();

}  // namespace ps::xfer::internal
