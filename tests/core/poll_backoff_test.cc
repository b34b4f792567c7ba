// PollBackoff (core/internal/poll_backoff.h): when a socket's reader polls
// before it blocks, and the loop that polls.
#include "core/internal/poll_backoff.h"

#include <gtest/gtest.h>

namespace ps::xfer::internal {
namespace {

constexpr long long kMs = 1'000'000;

TEST(PollBackoffTest, ShortYieldsKeepPolling) {
  PollBackoff b;
  EXPECT_TRUE(b.may_poll(0));
  EXPECT_FALSE(b.AfterYield(0, PollBackoff::kStarvedNs));
  EXPECT_TRUE(b.may_poll(PollBackoff::kStarvedNs));
}

TEST(PollBackoffTest, StarvedYieldPausesPollingAndThePauseDoubles) {
  PollBackoff b;
  const long long t = 5 * kMs;
  EXPECT_TRUE(b.AfterYield(0, t));  // a lost 5 ms time slice
  EXPECT_FALSE(b.may_poll(t));
  EXPECT_FALSE(b.may_poll(t + PollBackoff::kFirstPauseNs - 1));
  EXPECT_TRUE(b.may_poll(t + PollBackoff::kFirstPauseNs));
  EXPECT_EQ(b.pause_ns(), 2 * PollBackoff::kFirstPauseNs);
  for (int i = 0; i < 20; ++i) b.AfterYield(0, t);
  EXPECT_EQ(b.pause_ns(), PollBackoff::kMaxPauseNs);
}

TEST(PollBackoffTest, CatchingARequestStartsThePausesOver) {
  PollBackoff b;
  for (int i = 0; i < 3; ++i) b.AfterYield(0, kMs);
  EXPECT_EQ(b.pause_ns(), 8 * PollBackoff::kFirstPauseNs);
  b.Caught();
  EXPECT_EQ(b.pause_ns(), PollBackoff::kFirstPauseNs);
}

TEST(PollBackoffTest, LoopReturnsWhatArrivesAndErrors) {
  PollBackoff b;
  int calls = 0;
  auto third_time = [&]() -> StatusOr<bool> { return ++calls == 3; };
  StatusOr<bool> got = PollBeforeBlocking(b, third_time);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got);
  EXPECT_EQ(calls, 3);

  auto broken = []() -> StatusOr<bool> { return PeerLost("gone"); };
  EXPECT_TRUE(PollBeforeBlocking(b, broken).status().Is(StatusCode::kPeerLost));

  auto never = []() -> StatusOr<bool> { return false; };
  const long long start = MonotonicNanos();
  got = PollBeforeBlocking(b, never);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  EXPECT_GE(MonotonicNanos() - start, PollBackoff::kPollNs);
}

TEST(PollBackoffTest, PausedLoopDoesNotPoll) {
  PollBackoff b;
  b.AfterYield(0, MonotonicNanos());  // paused from now on
  int calls = 0;
  auto count = [&]() -> StatusOr<bool> { return ++calls > 0; };
  StatusOr<bool> got = PollBeforeBlocking(b, count);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace ps::xfer::internal
