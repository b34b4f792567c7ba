// Device memory regions (Context::AllocateDevice, core/memory_kind.h): over
// shm and tcp, puts, gets, scatter-gather and put-with-notify into a GPU's
// memory land byte for byte, staged by the owner's connection thread; local
// device buffers are staged by the origin (ContextOptions::device_buffers);
// atomics and notify words in device memory are refused. The tests that need
// a GPU skip, saying why, where none is usable. What runs everywhere: the
// refusals a machine or build without CUDA gives, and bad descriptors.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/descriptor.pb.h"
#include "core/endpoint.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::MemoryKind;
using xfer::MemoryRegion;
using xfer::TransportChoice;

std::unique_ptr<Context> NewContext(const std::string& name,
                                    TransportChoice transport,
                                    bool device_buffers = false) {
  xfer::ContextOptions o = TestOptions(name, transport);
  o.device_buffers = device_buffers;
  auto ctx = Context::Create(o);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return ctx.ok() ? std::move(ctx).value() : nullptr;
}

// Why device memory cannot be had here, or empty.
std::string DeviceUnusable() {
  auto ctx = NewContext("probe", TransportChoice::kTcp);
  if (ctx == nullptr) return "no context";
  auto r = ctx->AllocateDevice(4096, xfer::kRemoteRead);
  return r.ok() ? "" : r.status().ToString();
}

#define SKIP_WITHOUT_DEVICE()                                      \
  do {                                                             \
    const std::string why_ = DeviceUnusable();                     \
    if (!why_.empty()) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

TEST(DeviceMemoryTest, RefusalsNameTheReason) {
  auto ctx = NewContext("owner", TransportChoice::kTcp);
  ASSERT_NE(ctx, nullptr);
  auto empty = ctx->AllocateDevice(0, xfer::kRemoteRead);
  EXPECT_TRUE(empty.status().Is(StatusCode::kInvalidArgument));
  // Atomics and notify words stay in host memory, on every machine.
  for (uint32_t access :
       {xfer::kRemoteAll, xfer::kRemoteWrite | xfer::kNotifyEvents}) {
    auto r = ctx->AllocateDevice(4096, access);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(StatusCode::kNotSupported)) << r.status();
    EXPECT_NE(r.status().message().find("host memory"), std::string::npos)
        << r.status();
  }
  auto bad_flags = ctx->AllocateDevice(4096, 1u << 20);
  EXPECT_TRUE(bad_flags.status().Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(ctx->RegisterDevice(nullptr, 64, xfer::kRemoteRead)
                  .status()
                  .Is(StatusCode::kInvalidArgument));
  // Without a usable device the refusal says which part is missing.
  if (DeviceUnusable().empty()) return;
  auto r = ctx->AllocateDevice(4096, xfer::kRemoteRead | xfer::kRemoteWrite);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(StatusCode::kNotSupported)) << r.status();
  EXPECT_NE(r.status().message().find("cuda:0"), std::string::npos)
      << r.status();
  const std::string& m = r.status().message();
  EXPECT_TRUE(m.find("CUDA") != std::string::npos ||
              m.find("libcuda") != std::string::npos)
      << m;
  int host_word = 0;
  EXPECT_TRUE(
      ctx->RegisterDevice(&host_word, sizeof(host_word), xfer::kRemoteRead)
          .status()
          .Is(StatusCode::kNotSupported));
}

// A descriptor naming a memory kind this build does not know is refused by
// Import, not taken for host memory.
TEST(DeviceMemoryTest, UnknownMemoryKindIsRefused) {
  auto owner = NewContext("owner", TransportChoice::kTcp);
  auto peer = NewContext("peer", TransportChoice::kTcp);
  ASSERT_TRUE(owner != nullptr && peer != nullptr);
  auto region = owner->Allocate(64, xfer::kRemoteRead);
  ASSERT_TRUE(region.ok());
  auto ep = peer->Connect(owner->address());
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto host = (*ep)->Import((*region)->descriptor());
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->memory_kind(), MemoryKind::kHost);
  xfer::proto::RegionDescriptor d;
  ASSERT_TRUE(d.ParseFromString((*region)->descriptor()));
  d.set_memory_kind(7);
  auto unknown = (*ep)->Import(d.SerializeAsString());
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(unknown.status().Is(StatusCode::kInvalidArgument));
  EXPECT_NE(unknown.status().message().find("kind 7"), std::string::npos)
      << unknown.status();
}

class DeviceRegionTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  void SetUp() override {
    if (GetParam() == TransportChoice::kVerbs) {
      GTEST_SKIP() << "verbs cannot reach device memory (no GPUDirect yet)";
    }
    PS_SKIP_IF_UNUSABLE(GetParam());
    SKIP_WITHOUT_DEVICE();
    owner_ = NewContext("owner", GetParam());
    peer_ = NewContext("peer", GetParam(), /*device_buffers=*/true);
    ASSERT_TRUE(owner_ != nullptr && peer_ != nullptr);
    auto ep = peer_->Connect(owner_->address());
    ASSERT_TRUE(ep.ok()) << ep.status();
    ep_ = std::move(ep).value();
  }

  xfer::RemoteRegion Import(const MemoryRegion& r) {
    auto imported = ep_->Import(r.descriptor());
    EXPECT_TRUE(imported.ok()) << imported.status();
    return imported.ok() ? std::move(imported).value() : xfer::RemoteRegion();
  }

  std::unique_ptr<Context> owner_, peer_;
  std::shared_ptr<xfer::Endpoint> ep_;
};

// Host bytes into device memory and back, whole and scattered, larger than
// the staging buffer; the region's descriptor says where it lives.
TEST_P(DeviceRegionTest, PutsAndGetsLandExactly) {
  constexpr size_t kBytes = (3 << 20) + 123;
  auto region =
      owner_->AllocateDevice(kBytes, xfer::kRemoteRead | xfer::kRemoteWrite);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->kind(), MemoryKind::kCudaDevice);
  xfer::RemoteRegion r = Import(**region);
  EXPECT_EQ(r.memory_kind(), MemoryKind::kCudaDevice);
  std::vector<uint8_t> bytes(kBytes);
  FillPattern(bytes.data(), bytes.size(), 5);
  ASSERT_TRUE(ep_->Put(bytes.data(), bytes.size(), r, 0).ok());
  std::vector<uint8_t> back(kBytes, 0);
  ASSERT_TRUE(ep_->Get(back.data(), back.size(), r, 0).ok());
  EXPECT_EQ(back, bytes);
  // 300 pieces of 1000 bytes every 1024, written and read scattered.
  std::vector<xfer::Segment> out, in;
  std::vector<uint8_t> pieces(300 * 1000), read(300 * 1000, 0);
  FillPattern(pieces.data(), pieces.size(), 6);
  for (size_t i = 0; i < 300; ++i) {
    out.push_back({pieces.data() + i * 1000, 7 + i * 1024, 1000});
    in.push_back({read.data() + i * 1000, 7 + i * 1024, 1000});
  }
  ASSERT_TRUE(ep_->WriteV(out, r).ok());
  ASSERT_TRUE(ep_->ReadV(in, r).ok());
  EXPECT_EQ(read, pieces);
}

// The notify word (host memory) is set only after the data is in the
// device; a word inside device memory is refused with nothing written.
TEST_P(DeviceRegionTest, NotifyWordFollowsTheDeviceData) {
  auto data =
      owner_->AllocateDevice(1 << 20, xfer::kRemoteRead | xfer::kRemoteWrite);
  auto flag = owner_->Allocate(64, xfer::kRemoteWrite | xfer::kRemoteRead);
  ASSERT_TRUE(data.ok() && flag.ok());
  xfer::RemoteRegion rd = Import(**data), rf = Import(**flag);
  std::vector<uint8_t> bytes(1 << 20), back(1 << 20);
  for (uint64_t round = 1; round <= 5; ++round) {
    FillPattern(bytes.data(), bytes.size(), round);
    ASSERT_TRUE(
        ep_->PutWithNotify(bytes.data(), bytes.size(), rd, 0, rf, 0, round)
            .ok());
    EXPECT_EQ(__atomic_load_n(static_cast<uint64_t*>((*flag)->data()),
                              __ATOMIC_ACQUIRE),
              round);
    ASSERT_TRUE(ep_->Get(back.data(), back.size(), rd, 0).ok());
    ASSERT_EQ(back, bytes) << "round " << round;
  }
  const uint64_t word = 9;
  Status s = ep_->PutWithNotify(&word, 8, rd, 0, rd, 64, 1);
  EXPECT_TRUE(s.Is(StatusCode::kNotSupported)) << s;
}

// The origin's own device memory as the source of a put and the
// destination of a get (device_buffers on the peer's context).
TEST_P(DeviceRegionTest, LocalDeviceBuffersAreStaged) {
  constexpr size_t kBytes = 1 << 20;
  auto target =
      owner_->Allocate(kBytes, xfer::kRemoteRead | xfer::kRemoteWrite);
  auto local = peer_->AllocateDevice(kBytes, xfer::kRemoteRead);
  auto scratch = peer_->Allocate(kBytes, xfer::kRemoteRead);
  ASSERT_TRUE(target.ok() && local.ok() && scratch.ok());
  xfer::RemoteRegion rt = Import(**target);
  // Fill the device buffer through a get from the owner's host region.
  FillPattern(static_cast<uint8_t*>((*target)->data()), kBytes, 8);
  ASSERT_TRUE(ep_->Get((*local)->data(), kBytes, rt, 0).ok());
  // Put it back at an offset, from the device, and compare on the host.
  std::memset((*target)->data(), 0, kBytes);
  ASSERT_TRUE(ep_->Put((*local)->data(), kBytes / 2, rt, kBytes / 2).ok());
  std::vector<uint8_t> expected(kBytes);
  FillPattern(expected.data(), kBytes, 8);
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>((*target)->data()) + kBytes / 2,
                        expected.data(), kBytes / 2),
            0);
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceRegionTest,
                         ::testing::ValuesIn(TestedTransports()),
                         [](const auto& info) {
                           return TransportLabel(info.param);
                         });

}  // namespace
}  // namespace ps::testing
