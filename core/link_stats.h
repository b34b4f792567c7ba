// LinkStats: how a Context's connections to its peers have fared since it
// started, for monitoring (ps_server's and ps_worker's metrics): broken
// connections this side re-established, broken connections peers
// re-established to this side (their sessions resumed), and peers given up
// on (lost). Counted by the transports as it happens (relaxed atomics, on
// those rare events only); Context::link_stats() reads them from any
// thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace ps::xfer {

struct LinkStats {
  uint64_t reconnects = 0;  // connections this side dialed again, resumed
  uint64_t resumed = 0;     // connections peers dialed again, resumed here
  // Connections this side dialed (Connect) that lost their peer: it went
  // away or stayed unreachable past the peer timeout (not counted: this
  // side closing the endpoint). A peer that dialed this side and went away
  // is not told apart from one that finished, so it is not counted.
  uint64_t peers_lost = 0;
};

// The live counters: shared by a Context, its transports (which may outlive
// it) and whoever reads them (ContextOptions::link_counters).
struct LinkCounters {
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> resumed{0};
  std::atomic<uint64_t> peers_lost{0};

  LinkStats Get() const {
    constexpr auto kRelaxed = std::memory_order_relaxed;
    return {reconnects.load(kRelaxed), resumed.load(kRelaxed),
            peers_lost.load(kRelaxed)};
  }
};

}  // namespace ps::xfer
