// Backoff: how a worker waits for something a server does (an inbox head to
// move, a clock to advance, a lookup to be answered) on a machine with few
// cores: a few yields, then sleeps growing to 1 ms (or a shorter bound for
// a wait whose answer comes within milliseconds), so a waiting worker
// leaves the CPU to the server it waits for. It also keeps the deadline: a wait
// that sees no progress for `timeout_ms` gives up.
//
// Not thread-safe: one waiting thread owns a Backoff.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace ps::worker {

class Backoff {
 public:
  explicit Backoff(int timeout_ms, int max_sleep_us = 1000)
      : timeout_(std::chrono::milliseconds(timeout_ms)),
        deadline_(std::chrono::steady_clock::now() + timeout_),
        max_sleep_us_(max_sleep_us) {}

  // Call when the awaited thing moved: the deadline starts over.
  void Progress() {
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    polls_ = 0;
  }
  // Waits a little; false once the deadline passed.
  bool Wait() {
    ++polls_;
    if (polls_ <= 16) {
      std::this_thread::yield();
    } else {
      const int us = std::min(max_sleep_us_, 10 << std::min(polls_ - 16, 7));
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
    return std::chrono::steady_clock::now() < deadline_;
  }

 private:
  std::chrono::steady_clock::duration timeout_;
  std::chrono::steady_clock::time_point deadline_;
  const int max_sleep_us_;
  int polls_ = 0;
};

}  // namespace ps::worker
