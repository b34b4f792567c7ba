// net::RedialBackoff: the pause between a connector's dials of a peer it
// tries again until its deadline (a host without a route yet, a listener
// that gave a handshake up, a control connection that broke): 10 ms before
// the second dial, doubling up to 200 ms, so that a peer back within
// milliseconds is found at once and one gone for seconds costs a few dials.
//
// Thread safety: a value; one connector's.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

#include "net/unique_fd.h"

namespace ps::net {

class RedialBackoff {
 public:
  // Whether the next pause ends before `deadline`, leaving time to dial.
  bool Fits(Deadline deadline) const {
    return Deadline::clock::now() + pause_ < deadline;
  }
  // Sleeps the pause, then doubles it (at most kLongest).
  void Pause() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, kLongest);
  }

 private:
  static constexpr std::chrono::milliseconds kLongest{200};
  std::chrono::milliseconds pause_{10};
};

}  // namespace ps::net
