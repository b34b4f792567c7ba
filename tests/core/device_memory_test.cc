// Device memory regions (Context::AllocateDevice, core/memory_kind.h): over
// shm, tcp and verbs, puts, gets, scatter-gather and put-with-notify into a
// GPU's memory land byte for byte; local device buffers are staged by the
// origin (ContextOptions::device_buffers); atomics and notify words in
// device memory are refused. Both contexts live in this process, where CUDA
// IPC cannot open the owner's export: shm runs the staged fallback here,
// device_ipc_test.cc the IPC path across processes. Verbs uses GPUDirect
// RDMA where the NIC has it, else the owner's CPU stages (the staged
// protocol itself is tested without a GPU in xfer_staged_test.cc). The tests
// that need a GPU skip, saying why, where none is usable. What runs everywhere:
// the refusals a machine or build without CUDA gives, bad descriptors (a
// malformed CUDA IPC key), and the fallback from an IPC key that cannot be
// opened to staging.
#include "core/device/device_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/descriptor.pb.h"
#include "core/endpoint.h"
#include "core/internal/transport_provider.h"
#include "core/shm/device_ipc_key.h"
#include "core/shm/remote_mapping.h"
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

// The shm provider's key in a descriptor (a host region allocated with
// Allocate has an empty one), or null.
xfer::proto::TransportKey* ShmKey(xfer::proto::RegionDescriptor& d) {
  const uint32_t shm = xfer::internal::ProviderId(xfer::TransportKind::kShm);
  for (auto& k : *d.mutable_transports()) {
    if (k.provider() == shm) return &k;
  }
  return nullptr;
}

// The shm key's CUDA IPC form: round trip, and every malformed key refused
// by the parser, never read past its end.
TEST(DeviceMemoryTest, IpcKeyRoundTripsAndRefusesMalformedKeys) {
  xfer::internal::DeviceExport e;
  for (size_t i = 0; i < e.handle.size(); ++i) e.handle[i] = i * 7;
  e.offset = 4096;
  e.device_uuid.fill(0xab);
  const std::string key = xfer::internal::PackDeviceIpcKey(e);
  auto back = xfer::internal::ParseDeviceIpcKey(key);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->handle, e.handle);
  EXPECT_EQ(back->offset, e.offset);
  EXPECT_EQ(back->device_uuid, e.device_uuid);
  for (const std::string& bad :
       {std::string("x"), key.substr(0, key.size() - 1), key + "y",
        std::string(key.size(), '\0')}) {
    auto r = xfer::internal::ParseDeviceIpcKey(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(StatusCode::kInvalidArgument)) << r.status();
    EXPECT_NE(r.status().message().find("malformed CUDA IPC key"),
              std::string::npos)
        << r.status();
  }
}

// An owner's 4 KiB host region and a peer connected to it over shm, with
// the region's descriptor to forge the shm key of.
class ForgedShmKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PS_SKIP_IF_UNUSABLE(TransportChoice::kShm);
    owner_ = NewContext("owner", TransportChoice::kShm);
    peer_ = NewContext("peer", TransportChoice::kShm);
    ASSERT_TRUE(owner_ != nullptr && peer_ != nullptr);
    auto region =
        owner_->Allocate(4096, xfer::kRemoteRead | xfer::kRemoteWrite);
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = std::move(region).value();
    auto ep = peer_->Connect(owner_->address());
    ASSERT_TRUE(ep.ok()) << ep.status();
    ep_ = std::move(ep).value();
    ASSERT_TRUE(descriptor_.ParseFromString(region_->descriptor()));
    ASSERT_NE(ShmKey(descriptor_), nullptr);
  }

  // Imports the descriptor with its shm key replaced by `key`.
  StatusOr<xfer::RemoteRegion> ImportWithKey(const std::string& key) {
    ShmKey(descriptor_)->set_key(key);
    return ep_->Import(descriptor_.SerializeAsString());
  }

  std::unique_ptr<Context> owner_, peer_;
  std::shared_ptr<MemoryRegion> region_;
  std::shared_ptr<xfer::Endpoint> ep_;
  xfer::proto::RegionDescriptor descriptor_;
};

// A descriptor whose shm key is neither empty (a memfd) nor a CUDA IPC key
// is refused by Import with kInvalidArgument, not taken for either.
TEST_F(ForgedShmKeyTest, MalformedIpcKeyInDescriptorIsRefused) {
  auto imported = ImportWithKey(std::string(40, '\x5a'));
  ASSERT_FALSE(imported.ok());
  EXPECT_TRUE(imported.status().Is(StatusCode::kInvalidArgument))
      << imported.status();
  EXPECT_NE(imported.status().message().find("CUDA IPC key"), std::string::npos)
      << imported.status();
}

// A well-formed CUDA IPC key that cannot be opened here (no driver, or a
// handle the driver refuses) makes the origin stage through the owner's
// connection instead: the operations still land, on the owner's side.
TEST_F(ForgedShmKeyTest, UnopenableIpcKeyFallsBackToStaging) {
  auto imported = ImportWithKey(
      xfer::internal::PackDeviceIpcKey(xfer::internal::DeviceExport{}));
  ASSERT_TRUE(imported.ok()) << imported.status();
  std::vector<uint8_t> bytes(1000), back(1000, 0);
  FillPattern(bytes.data(), bytes.size(), 3);
  ASSERT_TRUE(ep_->Put(bytes.data(), bytes.size(), *imported, 96).ok());
  ASSERT_TRUE(ep_->Get(back.data(), back.size(), *imported, 96).ok());
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(region_->data()) + 96,
                        bytes.data(), bytes.size()),
            0);
  EXPECT_TRUE(xfer::internal::MappingOf(*imported)->device_refused.load());
  // Past the end: the owner's refusal, through the stream.
  Status s = ep_->Put(bytes.data(), bytes.size(), *imported, 4000);
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << s;
}

// Export, Open and Copy without a usable device refuse with the reason; a
// host pointer is never exported.
TEST(DeviceMemoryTest, IpcWithoutDeviceIsRefused) {
  auto memory = xfer::internal::DeviceMemory::Create();
  std::vector<uint8_t> host(64);
  auto exported = memory->Export(0, host.data(), host.size());
  EXPECT_FALSE(exported.ok());
  if (!DeviceUnusable().empty()) {
    EXPECT_TRUE(exported.status().Is(StatusCode::kNotSupported))
        << exported.status();
    auto opened = memory->Open(xfer::internal::DeviceExport{});
    EXPECT_TRUE(opened.status().Is(StatusCode::kNotSupported))
        << opened.status();
    const xfer::internal::CopyPiece piece{host.data(), host.data() + 32, 32};
    Status copied = memory->Copy(0, {&piece, 1});
    EXPECT_TRUE(copied.Is(StatusCode::kNotSupported)) << copied;
  }
}

class DeviceRegionTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  void SetUp() override {
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
