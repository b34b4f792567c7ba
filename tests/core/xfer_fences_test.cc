// Endpoint::WriteFence and ReadFence (core/endpoint.h) over tcp and shm, in
// one process: what each promises holds also where the transport makes it
// cheaper than Flush.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::Request;
using xfer::TransportChoice;

class XferFencesTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  void SetUp() override {
    PS_SKIP_IF_UNUSABLE(GetParam());
    auto owner = Context::Create(TestOptions("owner", GetParam()));
    auto peer = Context::Create(TestOptions("peer", GetParam()));
    ASSERT_TRUE(owner.ok() && peer.ok());
    owner_ = std::move(owner).value();
    peer_ = std::move(peer).value();
    auto ep = peer_->Connect(owner_->address());
    ASSERT_TRUE(ep.ok()) << ep.status();
    ep_ = std::move(ep).value();
  }

  xfer::RemoteRegion Import(const xfer::MemoryRegion& r) {
    auto imported = ep_->Import(r.descriptor());
    EXPECT_TRUE(imported.ok()) << imported.status();
    return imported.ok() ? std::move(imported).value() : xfer::RemoteRegion();
  }

  std::unique_ptr<Context> owner_, peer_;
  std::shared_ptr<xfer::Endpoint> ep_;
};

// Writes before a write fence are in place before a write after it: the
// application memory's puts (streamed on shm, so in flight when Post
// returns) are there once a mapped put after the fence is.
TEST_P(XferFencesTest, WritesBeforeTheFenceLandFirst) {
  constexpr size_t kBytes = 1 << 20;
  constexpr int kRounds = 20;
  std::vector<uint8_t> app(kBytes, 0);
  auto data = owner_->Register(app.data(), app.size(), xfer::kRemoteWrite);
  auto flag = owner_->Allocate(64, xfer::kRemoteWrite | xfer::kRemoteRead);
  ASSERT_TRUE(data.ok() && flag.ok());
  xfer::RemoteRegion rd = Import(**data), rf = Import(**flag);
  std::vector<uint8_t> bytes(kBytes);
  for (int round = 1; round <= kRounds; ++round) {
    FillPattern(bytes.data(), bytes.size(), round);
    Request put = ep_->PostPut(bytes.data(), bytes.size(), rd, 0);
    ASSERT_TRUE(ep_->WriteFence().ok());
    const uint64_t word = round;
    ASSERT_TRUE(ep_->Put(&word, 8, rf, 0).ok());
    // The flag is there (the blocking put returned), so the data is too:
    // its end, which a target copying in order writes last, first.
    constexpr size_t kTail = 4096;
    ASSERT_EQ(std::memcmp(app.data() + kBytes - kTail,
                          bytes.data() + kBytes - kTail, kTail),
              0)
        << "round " << round << ": the put before the fence was overtaken";
    ASSERT_EQ(std::memcmp(app.data(), bytes.data(), kBytes), 0);
    ASSERT_TRUE(put.Wait().ok());
  }
  EXPECT_TRUE(ep_->Flush().ok());
}

// A large scatter-gather write (streamed with non-temporal stores on shm:
// core/shm/streaming_copy.h) lands whole, unaligned pieces included, before
// the notify word of a put-with-notify after a write fence.
TEST_P(XferFencesTest, LargeWriteVLandsWholeBeforeTheNotifyWord) {
  constexpr size_t kPieces = 700, kPiece = 1001, kStride = 1030;
  auto region = owner_->Allocate(kPieces * kStride + 64,
                                 xfer::kRemoteWrite | xfer::kRemoteRead);
  ASSERT_TRUE(region.ok());
  xfer::RemoteRegion r = Import(**region);
  std::vector<uint8_t> bytes(kPieces * kPiece);
  FillPattern(bytes.data(), bytes.size(), 11);
  std::vector<xfer::Segment> segments;
  for (size_t i = 0; i < kPieces; ++i) {
    segments.push_back({bytes.data() + i * kPiece, 3 + i * kStride, kPiece});
  }
  ASSERT_TRUE(ep_->WriteV(segments, r).ok());
  ASSERT_TRUE(ep_->WriteFence().ok());
  const uint64_t word = 1;
  const uint64_t flag_at = kPieces * kStride + 8;
  ASSERT_TRUE(ep_->PutWithNotify(&word, 0, r, flag_at, r, flag_at, 7).ok());
  const auto* mem = static_cast<const uint8_t*>((*region)->data());
  EXPECT_EQ(__atomic_load_n(reinterpret_cast<const uint64_t*>(mem + flag_at),
                            __ATOMIC_ACQUIRE),
            7u);
  for (size_t i = 0; i < kPieces; ++i) {
    ASSERT_EQ(
        std::memcmp(mem + 3 + i * kStride, bytes.data() + i * kPiece, kPiece),
        0)
        << "piece " << i;
    ASSERT_EQ(mem[3 + i * kStride + kPiece], 0) << "past piece " << i;
  }
}

// After a read fence every get posted before it has its data.
TEST_P(XferFencesTest, ReadsBeforeTheFenceHaveTheirData) {
  constexpr int kGets = 64;
  constexpr size_t kBytes = 4096;
  std::vector<uint8_t> app(kGets * kBytes);
  FillPattern(app.data(), app.size(), 7);
  auto allocated = owner_->Allocate(app.size(), xfer::kRemoteRead);
  auto registered = owner_->Register(app.data(), app.size(), xfer::kRemoteRead);
  ASSERT_TRUE(allocated.ok() && registered.ok());
  std::memcpy((*allocated)->data(), app.data(), app.size());
  for (const auto& region : {*allocated, *registered}) {
    xfer::RemoteRegion r = Import(*region);
    std::vector<uint8_t> out(app.size(), 0);
    std::vector<Request> gets;
    for (int i = 0; i < kGets; ++i) {
      gets.push_back(
          ep_->PostGet(out.data() + i * kBytes, kBytes, r, i * kBytes));
    }
    ASSERT_TRUE(ep_->ReadFence().ok());
    for (auto& g : gets) EXPECT_TRUE(g.Test()) << "a get not done";
    EXPECT_EQ(out, app);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, XferFencesTest,
                         ::testing::ValuesIn(TestedTransports()),
                         [](const auto& info) {
                           return TransportLabel(info.param);
                         });

}  // namespace
}  // namespace ps::testing
