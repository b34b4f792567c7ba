// IdleSpin: how long an idle apply thread polls its inboxes before it
// sleeps until a packet rings, adapted to the traffic it sees.
//
// Polling after the last packet pays when the next one comes within the
// poll: it spares the sleeping thread's wake-up (a futex wake on the
// worker's side, two context switches here). It is wasted when the next one
// comes later, and on a machine with few cores the poll takes a core from
// the very workers whose packets it waits for. A C++ worker's large push is
// a burst of packets microseconds apart; a Python worker's step pushes one
// packet per shard every few milliseconds. So the thread polls the full
// window only after an idle gap shorter than the window (the last packet
// came while it would have been polling), and not at all after a longer one.
// One gap decides: the first packets of a burst after a pause cost one
// wake-up, and the burst turns the poll back on.
//
// Not thread-safe: one per apply thread.
#pragma once

#include <chrono>

namespace ps::server {

class IdleSpin {
 public:
  // `max`: the longest poll (ps_server --idle_spin_us).
  explicit IdleSpin(std::chrono::microseconds max) : max_(max), window_(max) {}

  // How long to poll in the idle period starting now.
  std::chrono::microseconds window() const { return window_; }

  // The idle period ended: a packet was found `gap` after it began.
  void IdleEnded(std::chrono::steady_clock::duration gap) {
    window_ = gap < max_ ? max_ : std::chrono::microseconds(0);
  }

 private:
  const std::chrono::microseconds max_;
  std::chrono::microseconds window_;
};

}  // namespace ps::server
