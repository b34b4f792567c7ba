// The status region of a server: 8-byte words that workers read (and, for
// clocks, write) one-sidedly. Laid out for `workers` workers:
//
//   word  w                : head of worker w's inbox (server writes)
//   word  workers + w      : clock of worker w (worker w writes; used on
//                            shard 0 only: BSP barriers and SSP bounds)
//   word  2 * workers      : shutdown flag (server writes 1 when stopping)
//
// The words share cache lines: the server writes a head once per applied
// packet, which is cheap next to applying it, and padding would make the
// clock scan of a barrier read W lines instead of a few.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ps::protocol {

struct StatusWords {
  uint32_t workers;

  uint64_t InboxHeadOffset(uint32_t worker) const { return 8ull * worker; }
  uint64_t ClockOffset(uint32_t worker) const {
    return 8ull * (workers + worker);
  }
  uint64_t ShutdownOffset() const { return 8ull * (2 * workers); }
  size_t Bytes() const { return 8ull * (2 * workers + 1); }
};

}  // namespace ps::protocol
