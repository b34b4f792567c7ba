// IdleSpin: an apply thread polls the full window after an idle gap shorter
// than the window, and not at all after a longer one.
#include "server/idle_spin.h"

#include <gtest/gtest.h>

namespace ps::server {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(IdleSpin, PollsTheFullWindowAtFirst) {
  IdleSpin spin(microseconds(50));
  EXPECT_EQ(spin.window(), microseconds(50));
}

TEST(IdleSpin, AGapLongerThanTheWindowTurnsThePollOff) {
  IdleSpin spin(microseconds(50));
  spin.IdleEnded(milliseconds(3));  // a Python worker's next step
  EXPECT_EQ(spin.window(), microseconds(0));
  spin.IdleEnded(microseconds(50));  // exactly the window: still too late
  EXPECT_EQ(spin.window(), microseconds(0));
}

TEST(IdleSpin, AShortGapTurnsItBackOn) {
  IdleSpin spin(microseconds(50));
  spin.IdleEnded(milliseconds(3));
  spin.IdleEnded(microseconds(12));  // the next packet of a burst
  EXPECT_EQ(spin.window(), microseconds(50));
  spin.IdleEnded(microseconds(0));
  EXPECT_EQ(spin.window(), microseconds(50));
}

TEST(IdleSpin, AZeroWindowNeverPolls) {
  IdleSpin spin(microseconds(0));
  EXPECT_EQ(spin.window(), microseconds(0));
  spin.IdleEnded(microseconds(0));
  EXPECT_EQ(spin.window(), microseconds(0));
}

}  // namespace
}  // namespace ps::server
