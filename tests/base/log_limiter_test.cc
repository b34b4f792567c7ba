// LogLimiter: one line per period, and the count of those held back.
#include "base/log_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace ps {
namespace {

TEST(LogLimiterTest, OneLinePerPeriodWithTheCountHeldBack) {
  LogLimiter limiter(std::chrono::milliseconds(200));
  uint64_t held_back = 99;
  EXPECT_TRUE(limiter.Allow(&held_back));
  EXPECT_EQ(held_back, 0u);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Allow(&held_back));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_TRUE(limiter.Allow(&held_back));
  EXPECT_EQ(held_back, 1000u);
  EXPECT_FALSE(limiter.Allow(&held_back));
}

TEST(LogLimiterTest, TheTailSaysHowManyWereHeldBack) {
  EXPECT_EQ(LogLimiter::HeldBack(0), "");
  EXPECT_EQ(LogLimiter::HeldBack(12),
            " (and 12 more like it since the last such line)");
}

}  // namespace
}  // namespace ps
