// Watchdog: fails the whole test binary when a scope outlives its deadline.
// The defects some tests guard against hang (a loop that never advances
// past a NaN) instead of failing, and ctest's own timeout is many minutes;
// with a watchdog such a test fails in seconds, saying what hung.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace ps::testing {

class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit)
      : thread_([this, what = std::move(what), limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
          std::fprintf(stderr, "FAILED: %s did not finish within %lld s\n",
                       what.c_str(), static_cast<long long>(limit.count()));
          std::fflush(stderr);
          std::_Exit(1);  // the hung thread cannot be stopped any other way
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace ps::testing
