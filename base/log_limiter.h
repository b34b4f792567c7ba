// LogLimiter: lets at most one log line through per period for one kind of
// event, and counts the ones it held back, so that a flood of the same
// failure (a peer that retries in a loop, a listener out of descriptors)
// costs one line per period, never a disk full of logs or a core spent on
// formatting them.
//
//   LogLimiter refused_(std::chrono::seconds(10));
//   uint64_t held_back = 0;
//   if (refused_.Allow(&held_back)) {
//     LOG(WARNING) << "refused " << who << ": " << why
//                  << LogLimiter::HeldBack(held_back);
//   }
//
// Unlike glog's LOG_EVERY_T, a limiter is an object: each listener (and each
// test) has its own, and the line says how many were held back.
//
// Thread-safe: Allow may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace ps {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogLimiter(Clock::duration period) : period_(period) {}

  // True when a line may be written now: the first call, and the first
  // after each period since the last line. *held_back gets the number of
  // calls that returned false since that line.
  bool Allow(uint64_t* held_back) {
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (logged_once_ && now - last_ < period_) {
      ++held_back_;
      return false;
    }
    logged_once_ = true;
    last_ = now;
    *held_back = held_back_;
    held_back_ = 0;
    return true;
  }

  // " (and 12 more like it since the last such line)", or "" for 0: the tail
  // of a line that Allow let through.
  static std::string HeldBack(uint64_t n) {
    if (n == 0) return "";
    return " (and " + std::to_string(n) +
           " more like it since the last such line)";
  }

 private:
  const Clock::duration period_;
  std::mutex mu_;
  bool logged_once_ = false;  // guarded by mu_
  Clock::time_point last_;    // guarded by mu_
  uint64_t held_back_ = 0;    // guarded by mu_
};

}  // namespace ps
