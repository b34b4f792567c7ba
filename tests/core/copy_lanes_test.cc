// Copy lanes (core/shm/copy_lanes.h): every chunk of a job runs once, a
// failure stops the job and comes back, a second caller is turned away
// rather than queued; and large shm writes from a context with
// copy_threads > 1 land byte for byte, from several threads at once, before
// the notify word after a write fence, with bad segments refused as without
// lanes.
#include "core/shm/copy_lanes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::TransportChoice;
using xfer::internal::CopyLanes;

// Chunks take a few microseconds, so the helpers wake and take some.
TEST(CopyLanesTest, EveryChunkRunsOnceJobAfterJob) {
  CopyLanes lanes(2);
  const std::thread::id caller = std::this_thread::get_id();
  int on_helpers = 0;
  for (int job = 0; job < 1000; ++job) {
    const size_t chunks = 1 + job % 37;
    std::vector<std::atomic<int>> runs(chunks);
    std::atomic<int> elsewhere{0};
    Status status = Internal("not set");
    ASSERT_TRUE(lanes.Run(
        chunks,
        [&](size_t i) {
          runs[i].fetch_add(1);
          if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
          const auto until =
              std::chrono::steady_clock::now() + std::chrono::microseconds(5);
          while (std::chrono::steady_clock::now() < until) {
          }
          return Status::OK();
        },
        &status));
    ASSERT_TRUE(status.ok()) << status;
    for (size_t i = 0; i < chunks; ++i) {
      ASSERT_EQ(runs[i].load(), 1) << "job " << job << " chunk " << i;
    }
    on_helpers += elsewhere.load();
  }
  EXPECT_GT(on_helpers, 0) << "no helper took a chunk";
}

TEST(CopyLanesTest, AFailureStopsTheJobAndComesBack) {
  CopyLanes lanes(3);
  constexpr size_t kChunks = 10000;
  std::atomic<size_t> ran{0};
  Status status;
  ASSERT_TRUE(lanes.Run(
      kChunks,
      [&](size_t i) {
        ran.fetch_add(1);
        return i == 5 ? OutOfRange("chunk 5") : Status::OK();
      },
      &status));
  EXPECT_TRUE(status.Is(StatusCode::kOutOfRange)) << status;
  EXPECT_EQ(status.message(), "chunk 5");
  EXPECT_LT(ran.load(), kChunks) << "the chunks after the failure ran";
  // The lanes serve the next job as before.
  ASSERT_TRUE(lanes.Run(
      4, [](size_t) { return Status::OK(); }, &status));
  EXPECT_TRUE(status.ok()) << status;
}

// Callers on four threads: each job either runs whole on the lanes or is
// turned away at once (and its caller would copy alone); none waits for
// another's.
TEST(CopyLanesTest, ConcurrentCallersRunOrAreTurnedAway) {
  CopyLanes lanes(2);
  std::atomic<int> ran{0}, refused{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int job = 0; job < 500; ++job) {
        std::vector<std::atomic<int>> runs(16);
        Status status;
        const bool accepted = lanes.Run(
            runs.size(),
            [&](size_t i) {
              runs[i].fetch_add(1);
              return Status::OK();
            },
            &status);
        for (auto& r : runs) {
          if (r.load() != (accepted ? 1 : 0)) ADD_FAILURE() << "job " << job;
        }
        (accepted ? ran : refused).fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(ran.load() + refused.load(), 2000);
  EXPECT_GT(ran.load(), 0);
}

class ShmCopyLanesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PS_SKIP_IF_UNUSABLE(TransportChoice::kShm);
    auto owner = Context::Create(TestOptions("owner", TransportChoice::kShm));
    xfer::ContextOptions o = TestOptions("peer", TransportChoice::kShm);
    o.copy_threads = 3;
    auto peer = Context::Create(o);
    ASSERT_TRUE(owner.ok() && peer.ok());
    owner_ = std::move(owner).value();
    peer_ = std::move(peer).value();
    auto ep = peer_->Connect(owner_->address());
    ASSERT_TRUE(ep.ok()) << ep.status();
    ep_ = std::move(ep).value();
    ASSERT_EQ(ep_->transport(), xfer::TransportKind::kShm);
  }

  std::unique_ptr<Context> owner_, peer_;
  std::shared_ptr<xfer::Endpoint> ep_;
};

// Four threads, each a series of large WriteVs into its own quarter of one
// region: pieces of odd sizes at odd strides, empty ones among them, and a
// single 3 MiB Put; each lands exactly, nothing past its pieces is touched,
// and a write fence orders it before the notify word.
TEST_F(ShmCopyLanesTest, LargeWritesFromManyThreadsLandExactly) {
  constexpr size_t kQuarter = 4 << 20;
  auto region = owner_->Allocate(4 * kQuarter + 64,
                                 xfer::kRemoteWrite | xfer::kRemoteRead);
  ASSERT_TRUE(region.ok());
  auto remote = ep_->Import((*region)->descriptor());
  ASSERT_TRUE(remote.ok());
  const auto* mem = static_cast<const uint8_t*>((*region)->data());
  const uint64_t flag_at = 4 * kQuarter;
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      const uint64_t base = t * kQuarter;
      for (int round = 1; round <= 6; ++round) {
        const size_t piece = 997 + 131 * (round + t), stride = piece + 29;
        const size_t pieces = (kQuarter - 64) / stride;
        std::vector<uint8_t> bytes(pieces * piece);
        FillPattern(bytes.data(), bytes.size(), t * 100 + round);
        std::vector<xfer::Segment> segments;
        for (size_t i = 0; i < pieces; ++i) {
          segments.push_back(
              {bytes.data() + i * piece, base + 5 + i * stride, piece});
          if (i % 100 == 0) segments.push_back({bytes.data(), base, 0});
        }
        Status s = ep_->WriteV(segments, *remote);
        if (s.ok()) s = ep_->WriteFence();
        const uint64_t word = round;
        if (s.ok()) {
          s = ep_->PutWithNotify(&word, 0, *remote, flag_at, *remote,
                                 flag_at + 8 * t, word);
        }
        if (!s.ok()) {
          ADD_FAILURE() << s;
          return;
        }
        for (size_t i = 0; i < pieces; ++i) {
          const uint8_t* at = mem + base + 5 + i * stride;
          if (std::memcmp(at, bytes.data() + i * piece, piece) != 0) {
            ADD_FAILURE() << "thread " << t << " round " << round << " piece "
                          << i;
            return;
          }
        }
        if (mem[base + 4] != 0) ADD_FAILURE() << "before the first piece";
      }
      // One segment, 3 MiB: shared out by offset within it.
      std::vector<uint8_t> bytes(3 << 20);
      FillPattern(bytes.data(), bytes.size(), t);
      Status s = ep_->Put(bytes.data(), bytes.size(), *remote, base + 1);
      if (!s.ok() || std::memcmp(mem + base + 1, bytes.data(), bytes.size())) {
        ADD_FAILURE() << "thread " << t << " 3 MiB put: " << s;
      }
    });
  }
  for (std::thread& t : writers) t.join();
  for (int t = 0; t < 4; ++t) {
    uint64_t word = 0;
    std::memcpy(&word, mem + flag_at + 8 * t, 8);
    EXPECT_EQ(word, 6u) << "thread " << t;
  }
}

// A segment past the region's end in the middle of a large WriteV fails the
// operation with kOutOfRange, as on one thread; the lanes keep serving.
TEST_F(ShmCopyLanesTest, BadSegmentIsRefused) {
  auto region = owner_->Allocate(2 << 20, xfer::kRemoteWrite);
  ASSERT_TRUE(region.ok());
  auto remote = ep_->Import((*region)->descriptor());
  ASSERT_TRUE(remote.ok());
  std::vector<uint8_t> bytes(1 << 20, 0x5a);
  std::vector<xfer::Segment> segments;
  for (size_t i = 0; i < 1024; ++i) {
    segments.push_back({bytes.data() + i * 1024, i * 1024, 1024});
  }
  segments[600].remote_offset = (2 << 20) - 100;
  Status s = ep_->WriteV(segments, *remote);
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << s;
  segments[600].remote_offset = 600 * 1024;
  EXPECT_TRUE(ep_->WriteV(segments, *remote).ok());
}

TEST(CopyThreadsOptionTest, OutOfRangeIsRefused) {
  for (int bad : {0, -1, xfer::ContextOptions::kMaxCopyThreads + 1}) {
    xfer::ContextOptions o = TestOptions("bad", TransportChoice::kAuto);
    o.copy_threads = bad;
    auto ctx = Context::Create(o);
    ASSERT_FALSE(ctx.ok()) << bad;
    EXPECT_TRUE(ctx.status().Is(StatusCode::kInvalidArgument));
    EXPECT_NE(ctx.status().message().find("copy_threads"), std::string::npos)
        << ctx.status();
  }
}

}  // namespace
}  // namespace ps::testing
