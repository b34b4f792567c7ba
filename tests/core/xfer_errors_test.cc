// Negative tests of the xfer core between real processes, on both
// transports: each bad request comes back as its own status, the target keeps
// serving, and a dead peer fails operations in bounded time.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/process_harness.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::Endpoint;
using xfer::RemoteRegion;
using xfer::Segment;
using xfer::TransportChoice;

class XferErrorsTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  void SetUp() override {
    PS_SKIP_IF_UNUSABLE(GetParam());
    target_.process = StartTarget("target", GetParam());
    std::optional<TargetInfo> info = AwaitReady(target_.process.channel());
    ASSERT_TRUE(info.has_value()) << "target did not start";
    target_.info = std::move(*info);
    auto ctx = Context::Create(TestOptions("origin", GetParam()));
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
    Status s = target_.Connect(*ctx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    // The target survived every bad request and exits on its own.
    if (target_.process.running()) {
      EXPECT_EQ(target_.Exit(), std::optional<int>(0));
    }
  }

  Endpoint& ep() { return *target_.ep; }
  const RemoteRegion& region(int r) { return target_.regions[r]; }

  // A good operation after a bad one: the endpoint and the target still work.
  void ExpectStillServing() {
    uint64_t word = 0x1234;
    Status s = ep().Put(&word, 8, region(kAllocatedRw), 512);
    EXPECT_TRUE(s.ok()) << s.ToString();
    uint64_t back = 0;
    s = ep().Get(&back, 8, region(kAllocatedRw), 512);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(back, word);
    EXPECT_FALSE(ep().lost());
  }

  std::unique_ptr<Context> ctx_;
  TargetHandle target_;
};

#define EXPECT_CODE(expr, code_)                        \
  do {                                                  \
    Status status_ = (expr);                            \
    EXPECT_EQ(status_.code(), StatusCode::code_)        \
        << #expr << " returned " << status_.ToString(); \
  } while (0)

TEST_P(XferErrorsTest, OutOfBoundsIsRefusedByOriginAndByTarget) {
  const RemoteRegion& r = region(kAllocatedRw);
  const uint64_t size = r.size();
  std::vector<uint8_t> buf(64, 0xcd);
  // The origin's own check, from the descriptor's bounds.
  EXPECT_CODE(ep().Put(buf.data(), 16, r, size - 8), kOutOfRange);
  EXPECT_CODE(ep().Get(buf.data(), 16, r, size), kOutOfRange);
  EXPECT_CODE(ep().FetchAdd64(r, size, 1).status(), kOutOfRange);
  EXPECT_CODE(ep().Put(buf.data(), 16, r, ~0ull - 4), kOutOfRange);

  // The target's check: the origin believes the region is twice as large.
  RemoteRegion big = r.WithSizeForTesting(size * 2);
  Status put = ep().Put(buf.data(), 16, big, size - 8);
  EXPECT_EQ(put.code(), StatusCode::kOutOfRange) << put.ToString();
  EXPECT_NE(put.message().find("target"), std::string::npos)
      << "the message should name the peer: " << put.ToString();
  EXPECT_CODE(ep().Get(buf.data(), 16, big, size), kOutOfRange);
  EXPECT_CODE(ep().FetchAdd64(big, size + 64, 1).status(), kOutOfRange);
  EXPECT_CODE(ep().CompareSwap64(big, size, 0, 1).status(), kOutOfRange);
  EXPECT_CODE(ep().Put(buf.data(), 16, big, ~0ull - 4), kOutOfRange);
  Segment segs[2] = {{buf.data(), 0, 8}, {buf.data() + 8, size + 4096, 8}};
  EXPECT_CODE(ep().WriteV(segs, big), kOutOfRange);
  EXPECT_CODE(ep().ReadV(segs, big), kOutOfRange);
  EXPECT_CODE(ep().PostPut(buf.data(), 64, big, size - 32).Wait(), kOutOfRange);

  // Nothing was written past or before the end.
  std::vector<uint8_t> zeros(4096, 0);
  EXPECT_EQ(target_.Hash(kAllocatedRw, size - 4096, 4096),
            Fnv1a(zeros.data(), zeros.size()));
  ExpectStillServing();
}

TEST_P(XferErrorsTest, WrongKeyIsRefused) {
  for (int index : {kAllocatedRw, kRegisteredRw}) {
    const RemoteRegion& r = region(index);
    RemoteRegion bad = r.WithKeyForTesting(r.key() ^ 0x5a5a5a5a);
    std::vector<uint8_t> buf(256, 0xee);
    EXPECT_CODE(ep().Put(buf.data(), buf.size(), bad, 0), kInvalidKey);
    EXPECT_CODE(ep().Get(buf.data(), buf.size(), bad, 0), kInvalidKey);
    EXPECT_CODE(ep().FetchAdd64(bad, 0, 1).status(), kInvalidKey);
    EXPECT_CODE(ep().CompareSwap64(bad, 0, 0, 1).status(), kInvalidKey);
    Segment seg{buf.data(), 64, 64};
    EXPECT_CODE(ep().WriteV({&seg, 1}, bad), kInvalidKey);
    EXPECT_CODE(ep().PutWithNotify(buf.data(), 64, bad, 0, bad, 1024, 1),
                kInvalidKey);
    // A good data region with a bad notify region must not set the word.
    EXPECT_CODE(ep().PutWithNotify(buf.data(), 64, r, 4096, bad, 1024, 1),
                kInvalidKey);
    std::vector<uint8_t> zeros(1024 + 8, 0);
    EXPECT_EQ(target_.Hash(index, 0, zeros.size()),
              Fnv1a(zeros.data(), zeros.size()))
        << "a request with a wrong key changed region " << index;
  }
  ExpectStillServing();
}

TEST_P(XferErrorsTest, WritesToAReadOnlyRegionAreDenied) {
  const RemoteRegion& ro = region(kReadOnly);
  std::vector<uint8_t> buf(128, 0x11);
  EXPECT_CODE(ep().Put(buf.data(), buf.size(), ro, 0), kAccessDenied);
  EXPECT_CODE(ep().FetchAdd64(ro, 0, 1).status(), kAccessDenied);
  // The target's check: the origin claims every access.
  RemoteRegion claim = ro.WithAccessForTesting(xfer::kRemoteAll);
  Status put = ep().Put(buf.data(), buf.size(), claim, 0);
  EXPECT_EQ(put.code(), StatusCode::kAccessDenied) << put.ToString();
  EXPECT_CODE(ep().PostPut(buf.data(), buf.size(), claim, 64).Wait(),
              kAccessDenied);
  Segment seg{buf.data(), 256, 64};
  EXPECT_CODE(ep().WriteV({&seg, 1}, claim), kAccessDenied);
  EXPECT_CODE(ep().FetchAdd64(claim, 0, 1).status(), kAccessDenied);
  EXPECT_CODE(ep().CompareSwap64(claim, 8, 0, 1).status(), kAccessDenied);
  EXPECT_CODE(
      ep().PutWithNotify(buf.data(), 64, region(kAllocatedRw), 0, claim, 0, 1),
      kAccessDenied);
  // The sync region allows atomics only: no reads.
  EXPECT_CODE(ep().Get(buf.data(), 8,
                       region(kSync).WithAccessForTesting(xfer::kRemoteAll), 0),
              kAccessDenied);
  // Reads are allowed, and the bytes are still the target's pattern.
  std::vector<uint8_t> got(kSmallRegionSize), expected(kSmallRegionSize);
  FillPattern(expected.data(), expected.size(), 77);
  Status s = ep().Get(got.data(), got.size(), ro, 0);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(got == expected) << "a denied write changed the region";
  EXPECT_EQ(target_.Hash(kReadOnly, 0, kSmallRegionSize),
            Fnv1a(expected.data(), expected.size()));
  ExpectStillServing();
}

TEST_P(XferErrorsTest, DeregisteredRegionIsNotReachable) {
  const RemoteRegion& doomed = region(kDoomed);
  uint64_t word = 5;
  ASSERT_TRUE(ep().Put(&word, 8, doomed, 0).ok());
  ASSERT_TRUE(
      Command(target_.process.channel(), "dereg " + std::to_string(kDoomed)));
  EXPECT_CODE(ep().Put(&word, 8, doomed, 0), kNotRegistered);
  EXPECT_CODE(ep().Get(&word, 8, doomed, 0), kNotRegistered);
  EXPECT_CODE(ep().FetchAdd64(doomed, 0, 1).status(), kNotRegistered);
  EXPECT_CODE(ep().PostGet(&word, 8, doomed, 0).Wait(), kNotRegistered);
  // Deregistering twice is an error of its own.
  ASSERT_TRUE(
      target_.process.channel().Send("dereg " + std::to_string(kDoomed)));
  std::optional<std::string> reply = target_.process.channel().Receive(20000);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->rfind("error not registered", 0), 0u) << *reply;
  ExpectStillServing();
}

// The target is killed and a new one started on the same port; an origin
// child (the test process stays thread-free so it can fork the new target)
// reconnects: the old descriptor is stale, a fresh one works.
int RunRestartOrigin(LineChannel& ch, TransportChoice t) {
  auto created = Context::Create(TestOptions("origin", t, 0, 2000));
  PS_CHILD_CHECK(created.ok(), created.status().ToString());
  std::unique_ptr<Context> ctx = std::move(created).value();
  auto read_target = [&ch]() -> std::optional<TargetInfo> {
    return AwaitReady(ch, 30000);
  };
  std::optional<TargetInfo> first = read_target();
  PS_CHILD_CHECK(first.has_value());
  auto ep = ctx->Connect(first->address);
  PS_CHILD_CHECK(ep.ok(), ep.status().ToString());
  auto old_region = (*ep)->Import(first->descriptors[kAllocatedRw]);
  PS_CHILD_CHECK(old_region.ok(), old_region.status().ToString());
  uint64_t word = 42;
  PS_CHILD_CHECK((*ep)->Put(&word, 8, *old_region, 0).ok());
  ch.Send("first-done");

  std::optional<TargetInfo> second = read_target();
  PS_CHILD_CHECK(second.has_value());
  PS_CHILD_CHECK(second->address == first->address,
                 "restarted on " + second->address);
  // The old endpoint learns that its peer is gone, in bounded time.
  const int64_t start = MonotonicNanos();
  Status old_put;
  while ((old_put = (*ep)->Put(&word, 8, *old_region, 0)).ok() &&
         MonotonicNanos() - start < 10'000'000'000) {
    usleep(1000);
  }
  PS_CHILD_CHECK(old_put.Is(StatusCode::kPeerLost), old_put.ToString());

  auto fresh = ctx->Connect(second->address);
  PS_CHILD_CHECK(fresh.ok(), fresh.status().ToString());
  PS_CHILD_CHECK((*fresh)->peer_instance() != (*ep)->peer_instance());
  auto stale = (*fresh)->Import(first->descriptors[kAllocatedRw]);
  PS_CHILD_CHECK(stale.status().Is(StatusCode::kStaleDescriptor),
                 stale.status().ToString());
  auto current = (*fresh)->Import(second->descriptors[kAllocatedRw]);
  PS_CHILD_CHECK(current.ok(), current.status().ToString());
  word = 43;
  Status s = (*fresh)->Put(&word, 8, *current, 0);
  PS_CHILD_CHECK(s.ok(), s.ToString());
  uint64_t back = 0;
  s = (*fresh)->Get(&back, 8, *current, 0);
  PS_CHILD_CHECK(s.ok() && back == 43, s.ToString());
  ch.Send("done");
  std::optional<std::string> line = ch.Receive(30000);
  return line && *line == "exit" ? 0 : 3;
}

TEST_P(XferErrorsTest, StaleDescriptorAfterPeerRestartIsRefused) {
  // This test forks after SetUp made a context: it needs its own processes.
  // Drop the fixture's context first so this process has no threads.
  target_.ep.reset();
  target_.regions.clear();
  ctx_.reset();
  ASSERT_EQ(target_.Exit(), std::optional<int>(0));

  const TransportChoice t = GetParam();
  ChildProcess origin = ChildProcess::Start(
      "origin", [t](LineChannel& ch) { return RunRestartOrigin(ch, t); });
  ChildProcess first = StartTarget("restarting-target", t);
  std::optional<std::string> ready = first.channel().Receive(20000);
  ASSERT_TRUE(ready.has_value());
  ASSERT_TRUE(origin.channel().Send(*ready));
  ASSERT_EQ(origin.channel().Receive(20000),
            std::optional<std::string>("first-done"));
  const std::string address = SplitWords(*ready).at(1);
  const uint16_t port =
      static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  first.Kill();

  // The same name on the same port; the port may take a moment to be free.
  ChildProcess second;
  ready.reset();
  for (int attempt = 0; attempt < 50; ++attempt) {
    second = StartTarget("restarting-target", t, port);
    ready = second.channel().Receive(20000);
    if (ready) break;
    usleep(100000);
  }
  ASSERT_TRUE(ready.has_value()) << "no new target on port " << port;
  ASSERT_TRUE(origin.channel().Send(*ready));
  EXPECT_EQ(origin.channel().Receive(30000),
            std::optional<std::string>("done"));
  origin.channel().Send("exit");
  EXPECT_EQ(origin.Wait(20000), std::optional<int>(0));
  second.channel().Send("exit");
  EXPECT_EQ(second.Wait(20000), std::optional<int>(0));
}

// Two threads move large blocks to and from the target (blocking puts, and
// windows of non-blocking gets) until the target is killed; both must fail
// with kPeerLost soon after, and later operations fail at once.
int RunBusyOrigin(LineChannel& ch, TransportChoice t) {
  auto created = Context::Create(TestOptions("busy-origin", t, 0, 2000));
  PS_CHILD_CHECK(created.ok(), created.status().ToString());
  std::unique_ptr<Context> ctx = std::move(created).value();
  std::optional<TargetInfo> info = AwaitReady(ch, 30000);
  PS_CHILD_CHECK(info.has_value());
  auto connected = ctx->Connect(info->address);
  PS_CHILD_CHECK(connected.ok(), connected.status().ToString());
  std::shared_ptr<Endpoint> ep = *connected;
  auto a = ep->Import(info->descriptors[kAllocatedRw]);
  auto b = ep->Import(info->descriptors[kRegisteredRw]);
  PS_CHILD_CHECK(a.ok() && b.ok());

  struct Outcome {
    std::atomic<uint64_t> iterations{0};
    std::atomic<bool> finished{false};
    Status status;  // read only after join
    int64_t at = 0;
  } put_side, get_side;
  std::vector<uint8_t> src(kTargetRegionSize, 0x5c);
  std::vector<uint8_t> dst(kTargetRegionSize);
  std::thread putter([&] {
    for (;;) {
      Status s = ep->Put(src.data(), src.size(), *a, 0);
      if (!s.ok()) {
        put_side.at = MonotonicNanos();
        put_side.status = s;
        put_side.finished = true;
        return;
      }
      put_side.iterations++;
    }
  });
  std::thread getter([&] {
    constexpr size_t kPiece = kTargetRegionSize / 4;
    for (;;) {
      xfer::Request reqs[4];
      for (int q = 0; q < 4; ++q) {
        reqs[q] = ep->PostGet(dst.data() + q * kPiece, kPiece, *b, q * kPiece);
      }
      Status first;
      for (auto& r : reqs) {
        Status s = r.Wait();
        if (first.ok() && !s.ok()) first = s;
      }
      if (!first.ok()) {
        get_side.at = MonotonicNanos();
        get_side.status = first;
        get_side.finished = true;
        return;
      }
      get_side.iterations++;
    }
  });
  // Tell the parent once both sides are moving.
  while (put_side.iterations < 5 || get_side.iterations < 5) {
    if (put_side.finished || get_side.finished) break;
    usleep(1000);
  }
  ch.Send("moving");
  putter.join();
  getter.join();
  uint64_t word = 0;
  const int64_t before = MonotonicNanos();
  Status after = ep->Get(&word, 8, *a, 0);
  const int64_t after_ns = MonotonicNanos() - before;
  PS_CHILD_CHECK(ep->lost());
  ch.Send("done " + std::to_string(static_cast<int>(put_side.status.code())) +
          " " + std::to_string(put_side.at) + " " +
          std::to_string(static_cast<int>(get_side.status.code())) + " " +
          std::to_string(get_side.at) + " " +
          std::to_string(static_cast<int>(after.code())) + " " +
          std::to_string(after_ns));
  std::fprintf(stderr, "busy origin: put %s, get %s\n",
               put_side.status.ToString().c_str(),
               get_side.status.ToString().c_str());
  std::optional<std::string> line = ch.Receive(30000);
  return line && *line == "exit" ? 0 : 3;
}

TEST_P(XferErrorsTest, PeerKilledMidTransferFailsInBoundedTime) {
  target_.ep.reset();
  target_.regions.clear();
  ctx_.reset();
  ASSERT_EQ(target_.Exit(), std::optional<int>(0));

  const TransportChoice t = GetParam();
  ChildProcess victim = StartTarget("victim", t);
  ChildProcess origin = ChildProcess::Start(
      "busy-origin", [t](LineChannel& ch) { return RunBusyOrigin(ch, t); });
  std::optional<std::string> ready = victim.channel().Receive(20000);
  ASSERT_TRUE(ready.has_value());
  ASSERT_TRUE(origin.channel().Send(*ready));
  ASSERT_EQ(origin.channel().Receive(30000),
            std::optional<std::string>("moving"));
  usleep(50000);
  const int64_t killed_at = MonotonicNanos();
  victim.Kill();

  std::optional<std::string> done = origin.channel().Receive(20000);
  ASSERT_TRUE(done.has_value()) << "the origin hangs after its peer died";
  std::vector<std::string> w = SplitWords(*done);
  ASSERT_EQ(w.size(), 7u) << *done;
  const int kPeerLost = static_cast<int>(StatusCode::kPeerLost);
  EXPECT_EQ(std::stoi(w[1]), kPeerLost) << "put side";
  EXPECT_EQ(std::stoi(w[3]), kPeerLost) << "get side";
  EXPECT_EQ(std::stoi(w[5]), kPeerLost) << "operation after the loss";
  const double put_s = (std::stoll(w[2]) - killed_at) / 1e9;
  const double get_s = (std::stoll(w[4]) - killed_at) / 1e9;
  EXPECT_LT(put_s, 5.0);
  EXPECT_LT(get_s, 5.0);
  EXPECT_LT(std::stoll(w[6]) / 1e9, 0.5) << "a lost peer must fail at once";
  std::fprintf(stderr, "peer lost noticed after %.3f s (put), %.3f s (get)\n",
               put_s, get_s);
  origin.channel().Send("exit");
  EXPECT_EQ(origin.Wait(20000), std::optional<int>(0));
}

INSTANTIATE_TEST_SUITE_P(
    Transports, XferErrorsTest, ::testing::ValuesIn(TestedTransports()),
    [](const ::testing::TestParamInfo<TransportChoice>& info) {
      return TransportLabel(info.param);
    });

}  // namespace
}  // namespace ps::testing
