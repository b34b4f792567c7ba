// Regions a verbs peer reaches through the target's CPU (staged): device
// memory whose NIC has no GPUDirect RDMA. There is no GPU in CI, so the
// target stages its host regions without atomics instead
// (ContextOptions::verbs_stage_host_regions_for_testing; kReadOnly and the
// kStaged* regions of tests/core/xfer_test_peer.h): the same protocol, with
// memcpy as the copy. Between real processes: data lands byte for byte, in
// more than one piece of the staging buffer and in small ones, scattered and
// batched with host operations; every bad request gets the region table's
// own status with nothing written (wrong key, past the end, no access,
// deregistered); atomics and notify words in staged regions are refused; a
// notify word in host memory follows the staged data; a dead or silent
// target fails staged operations in bounded time. On tcp and shm the flag
// changes nothing, so the same expectations hold there: the staged route
// answers as the others do.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "core/batch.h"
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

#define EXPECT_CODE(expr, code_)                        \
  do {                                                  \
    Status status_ = (expr);                            \
    EXPECT_EQ(status_.code(), StatusCode::code_)        \
        << #expr << " returned " << status_.ToString(); \
  } while (0)

class XferStagedTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  void SetUp() override {
    PS_SKIP_IF_UNUSABLE(GetParam());
    target_.process = StartTarget("target", GetParam(), 0, /*staged=*/true);
    std::optional<TargetInfo> info = AwaitReady(target_.process.channel());
    ASSERT_TRUE(info.has_value()) << "target did not start";
    ASSERT_EQ(info->descriptors.size(), size_t{kStagedTargetRegionCount});
    target_.info = std::move(*info);
    auto ctx = Context::Create(TestOptions("origin", GetParam(), 0, 3000));
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
    Status s = target_.Connect(*ctx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    if (target_.process.running()) {
      EXPECT_EQ(target_.Exit(), std::optional<int>(0));
    }
  }

  Endpoint& ep() { return *target_.ep; }
  const RemoteRegion& region(int r) { return target_.regions[r]; }
  bool verbs() const { return GetParam() == TransportChoice::kVerbs; }

  std::unique_ptr<Context> ctx_;
  TargetHandle target_;
};

// Larger than the staging buffer (512 KiB), at odd offsets and lengths,
// whole and scattered; the target's own view agrees.
TEST_P(XferStagedTest, PutsAndGetsLandExactly) {
  const RemoteRegion& r = region(kStagedRw);
  constexpr size_t kBytes = (700 << 10) + 123;
  std::vector<uint8_t> bytes(kBytes), back(kBytes, 0);
  FillPattern(bytes.data(), kBytes, 5);
  ASSERT_TRUE(ep().Put(bytes.data(), kBytes, r, 77).ok());
  ASSERT_TRUE(ep().Get(back.data(), kBytes, r, 77).ok());
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(target_.Hash(kStagedRw, 77, kBytes), Fnv1a(bytes.data(), kBytes));
  // One byte, and nothing at all.
  uint8_t one = 0x5c, got = 0;
  ASSERT_TRUE(ep().Put(&one, 1, r, kTargetRegionSize - 1).ok());
  ASSERT_TRUE(ep().Get(&got, 1, r, kTargetRegionSize - 1).ok());
  EXPECT_EQ(got, one);
  EXPECT_TRUE(ep().Put(&one, 0, r, 0).ok());
  // 100 pieces of 1000 bytes every 4096, written and read scattered.
  std::vector<Segment> out, in;
  std::vector<uint8_t> pieces(100 * 1000), read(100 * 1000, 0);
  FillPattern(pieces.data(), pieces.size(), 6);
  for (size_t i = 0; i < 100; ++i) {
    out.push_back({pieces.data() + i * 1000, 512 * 1024 + i * 4096, 1000});
    in.push_back({read.data() + i * 1000, 512 * 1024 + i * 4096, 1000});
  }
  ASSERT_TRUE(ep().WriteV(out, r).ok());
  ASSERT_TRUE(ep().ReadV(in, r).ok());
  EXPECT_EQ(read, pieces);
  // The read-only region is staged too, and holds the target's pattern.
  std::vector<uint8_t> ro(kSmallRegionSize), expected(kSmallRegionSize);
  FillPattern(expected.data(), expected.size(), 77);
  ASSERT_TRUE(ep().Get(ro.data(), ro.size(), region(kReadOnly), 0).ok());
  EXPECT_EQ(ro, expected);
}

// A batch mixes staged and host operations; a non-blocking staged put is
// complete (and flushed) like any other.
TEST_P(XferStagedTest, BatchesMixStagedAndHostRegions) {
  std::vector<uint8_t> a(70000), b(70000), got_a(70000), got_b(70000);
  FillPattern(a.data(), a.size(), 11);
  FillPattern(b.data(), b.size(), 12);
  xfer::Batch put;
  put.Put(a.data(), a.size(), region(kAllocatedRw), 4096);
  put.Put(b.data(), b.size(), region(kStagedRw), 4096);
  uint64_t prev = 1;
  put.FetchAdd64(region(kAllocatedRw), 0, 3, &prev);
  ASSERT_TRUE(ep().Post(put).Wait().ok());
  EXPECT_EQ(prev, 0u);
  xfer::Batch get;
  get.Get(got_a.data(), got_a.size(), region(kAllocatedRw), 4096);
  get.Get(got_b.data(), got_b.size(), region(kStagedRw), 4096);
  ASSERT_TRUE(ep().Post(get).Wait().ok());
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
  std::vector<uint8_t> c(1000);
  FillPattern(c.data(), c.size(), 13);
  xfer::Request pending =
      ep().PostPut(c.data(), c.size(), region(kStagedRw), 0);
  ASSERT_TRUE(ep().Flush().ok());
  EXPECT_TRUE(pending.Wait().ok());
  EXPECT_EQ(target_.Hash(kStagedRw, 0, c.size()), Fnv1a(c.data(), c.size()));
}

TEST_P(XferStagedTest, WrongKeyIsRefusedWithNothingWritten) {
  const RemoteRegion& r = region(kStagedRw);
  RemoteRegion bad = r.WithKeyForTesting(r.key() ^ 0x5a5a5a5a);
  std::vector<uint8_t> buf(100000, 0xee);
  EXPECT_CODE(ep().Put(buf.data(), buf.size(), bad, 0), kInvalidKey);
  EXPECT_CODE(ep().Get(buf.data(), buf.size(), bad, 0), kInvalidKey);
  Segment seg{buf.data(), 64, 64};
  EXPECT_CODE(ep().WriteV({&seg, 1}, bad), kInvalidKey);
  EXPECT_CODE(
      ep().PutWithNotify(buf.data(), 64, bad, 0, region(kAllocatedRw), 1024, 1),
      kInvalidKey);
  std::vector<uint8_t> zeros(buf.size(), 0);
  EXPECT_EQ(target_.Hash(kStagedRw, 0, zeros.size()),
            Fnv1a(zeros.data(), zeros.size()));
  EXPECT_EQ(target_.Load64(kAllocatedRw, 1024), std::optional<uint64_t>(0));
}

// Past the end by the target's check (the origin believes the region is
// larger): refused whole, even where the first frame's worth would fit.
TEST_P(XferStagedTest, OutOfBoundsIsRefusedWithNothingWritten) {
  const RemoteRegion& r = region(kStagedRw);
  const uint64_t size = r.size();
  RemoteRegion big = r.WithSizeForTesting(size * 2);
  std::vector<uint8_t> buf(200000, 0xcd);
  const uint64_t at = size - 100000;  // fits 100000 bytes, not 200000
  Status put = ep().Put(buf.data(), buf.size(), big, at);
  EXPECT_EQ(put.code(), StatusCode::kOutOfRange) << put.ToString();
  EXPECT_NE(put.message().find("target"), std::string::npos) << put;
  EXPECT_CODE(ep().Get(buf.data(), buf.size(), big, at), kOutOfRange);
  EXPECT_CODE(ep().Put(buf.data(), 16, big, ~0ull - 4), kOutOfRange);
  Segment segs[2] = {{buf.data(), 0, 8}, {buf.data() + 8, size + 4096, 8}};
  EXPECT_CODE(ep().ReadV(segs, big), kOutOfRange);
  EXPECT_CODE(ep().PostPut(buf.data(), 64, big, size - 32).Wait(), kOutOfRange);
  std::vector<uint8_t> zeros(100000, 0);
  EXPECT_EQ(target_.Hash(kStagedRw, at, zeros.size()),
            Fnv1a(zeros.data(), zeros.size()));
  if (verbs()) {
    // The error is also the next Flush's, as for a refused RDMA write.
    EXPECT_CODE(ep().Put(buf.data(), 16, big, size), kOutOfRange);
    EXPECT_FALSE(ep().Flush().ok());
    EXPECT_TRUE(ep().Flush().ok());
  }
}

TEST_P(XferStagedTest, AccessFlagsAreTheTargets) {
  std::vector<uint8_t> buf(100000, 0x11);
  // Writes into the read-only region, claiming every access.
  RemoteRegion ro = region(kReadOnly).WithAccessForTesting(xfer::kRemoteAll);
  EXPECT_CODE(ep().Put(buf.data(), kSmallRegionSize, ro, 0), kAccessDenied);
  Segment seg{buf.data(), 256, 64};
  EXPECT_CODE(ep().WriteV({&seg, 1}, ro), kAccessDenied);
  std::vector<uint8_t> expected(kSmallRegionSize);
  FillPattern(expected.data(), expected.size(), 77);
  EXPECT_EQ(target_.Hash(kReadOnly, 0, kSmallRegionSize),
            Fnv1a(expected.data(), expected.size()));
  // Reads from the write-only region.
  RemoteRegion wo =
      region(kStagedWriteOnly).WithAccessForTesting(xfer::kRemoteAll);
  ASSERT_TRUE(ep().Put(buf.data(), 4096, wo, 0).ok());
  EXPECT_CODE(ep().Get(buf.data(), 4096, wo, 0), kAccessDenied);
  // Atomics: staged regions hold none (the target checks the access first,
  // as the tcp server does for device memory).
  EXPECT_CODE(ep().FetchAdd64(ro, 0, 1).status(), kAccessDenied);
  RemoteRegion rw = region(kStagedRw).WithAccessForTesting(xfer::kRemoteAll);
  EXPECT_CODE(ep().CompareSwap64(rw, 8, 0, 1).status(), kAccessDenied);
}

TEST_P(XferStagedTest, DeregisteredRegionIsNotReachable) {
  const RemoteRegion& doomed = region(kStagedDoomed);
  uint64_t word = 5;
  ASSERT_TRUE(ep().Put(&word, 8, doomed, 0).ok());
  ASSERT_TRUE(Command(target_.process.channel(),
                      "dereg " + std::to_string(kStagedDoomed)));
  EXPECT_CODE(ep().Put(&word, 8, doomed, 0), kNotRegistered);
  EXPECT_CODE(ep().Get(&word, 8, doomed, 0), kNotRegistered);
  EXPECT_CODE(ep().PostGet(&word, 8, doomed, 0).Wait(), kNotRegistered);
  // Still serving.
  ASSERT_TRUE(ep().Put(&word, 8, region(kStagedRw), 0).ok());
  EXPECT_FALSE(ep().lost());
}

// The word (host memory, stored by the NIC on verbs) is set only after the
// staged data is in place; a word in a staged region is refused with
// nothing written.
TEST_P(XferStagedTest, NotifyWordFollowsTheStagedData) {
  std::vector<uint8_t> bytes(200000);
  for (uint64_t round = 1; round <= 4; ++round) {
    FillPattern(bytes.data(), bytes.size(), round);
    ASSERT_TRUE(ep().PutWithNotify(bytes.data(), bytes.size(),
                                   region(kStagedRw), 4096,
                                   region(kAllocatedRw), 64, round)
                    .ok());
    EXPECT_EQ(target_.Load64(kAllocatedRw, 64), std::optional<uint64_t>(round));
    EXPECT_EQ(target_.Hash(kStagedRw, 4096, bytes.size()),
              Fnv1a(bytes.data(), bytes.size()));
  }
  if (verbs()) {
    std::vector<uint8_t> data(64, 0x42);
    Status s = ep().PutWithNotify(data.data(), data.size(), region(kStagedRw),
                                  0, region(kStagedRw), 128, 9);
    EXPECT_TRUE(s.Is(StatusCode::kNotSupported)) << s;
    EXPECT_NE(s.message().find("staged"), std::string::npos) << s;
    std::vector<uint8_t> zeros(136, 0);
    EXPECT_EQ(target_.Hash(kStagedRw, 0, zeros.size()),
              Fnv1a(zeros.data(), zeros.size()));
  }
}

// A killed target fails staged operations within the peer timeout.
TEST_P(XferStagedTest, DeadTargetFailsStagedOperations) {
  target_.process.Kill();
  std::vector<uint8_t> buf(100000, 1);
  const auto start = std::chrono::steady_clock::now();
  Status put = ep().Put(buf.data(), buf.size(), region(kStagedRw), 0);
  Status get = ep().Get(buf.data(), buf.size(), region(kStagedRw), 0);
  EXPECT_FALSE(put.ok());
  EXPECT_TRUE(get.Is(StatusCode::kPeerLost)) << get;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A target that stops answering (SIGSTOP) fails staged operations once the
// origin's peer timeout (3 s) passed: they have no NIC completion whose
// absence would say so.
TEST_P(XferStagedTest, SilentTargetFailsStagedOperationsInTime) {
  if (!verbs()) GTEST_SKIP() << "only verbs stages through the target's CPU";
  ASSERT_EQ(kill(target_.process.pid(), SIGSTOP), 0);
  std::vector<uint8_t> buf(1000, 1);
  const auto start = std::chrono::steady_clock::now();
  Status put = ep().Put(buf.data(), buf.size(), region(kStagedRw), 0);
  EXPECT_TRUE(put.Is(StatusCode::kPeerLost)) << put;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  target_.process.Kill();  // SIGKILL ends a stopped process too
}

INSTANTIATE_TEST_SUITE_P(Transports, XferStagedTest,
                         ::testing::ValuesIn(TestedTransports()),
                         [](const auto& info) {
                           return TransportLabel(info.param);
                         });

}  // namespace
}  // namespace ps::testing
