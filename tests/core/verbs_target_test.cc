// The staged requests of a verbs target (core/verbs/verbs_target.h) as a
// buggy or hostile origin could send them, on a real RDMA device (soft-RoCE
// under scripts/verbs_vm.sh) and a real socket: requests out of order,
// pieces larger than the staging buffer or than their segment, and checks
// against the region table, each answered with its status while the target
// keeps serving. The well-behaved route is tested end to end in
// xfer_staged_test.cc.
#include "core/verbs/verbs_target.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/access.h"
#include "core/context_environment.h"
#include "core/device/device_memory.h"
#include "core/internal/hello.h"
#include "core/internal/region_table.h"
#include "core/verbs/queue_pair.h"
#include "core/verbs/verbs_device.h"
#include "core/verbs/verbs_transport.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::TransportChoice;
using xfer::internal::DeviceMemory;
using xfer::internal::kStagingBytes;
using xfer::internal::NotifyTarget;
using xfer::internal::QueuePair;
using xfer::internal::RegionTable;
using xfer::internal::VerbsDevice;
using xfer::internal::VerbsTarget;
using xfer::proto::VerbsControl;
using xfer::proto::VerbsControlReply;

constexpr uint64_t kInstance = 7;
constexpr uint64_t kRegionId = 1;
constexpr uint64_t kKey = 0x1234;
constexpr size_t kRegionBytes = 1 << 20;

class VerbsTargetTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  void SetUp() override {
    PS_SKIP_IF_UNUSABLE(GetParam());
    // The device as a program's main() would choose it (XFER_IB_DEV etc.).
    auto options = xfer::ApplyEnvironment({}, environ);
    ASSERT_TRUE(options.ok()) << options.status();
    auto device = VerbsDevice::Open(
        {options->ib_device, options->ib_port, options->ib_gid_index});
    ASSERT_TRUE(device.ok()) << device.status();
    memory_.assign(kRegionBytes, 0);
    table_.Insert(RegionTable::WrapForTesting(
        kRegionId, kKey, memory_.data(), memory_.size(),
        xfer::kRemoteRead | xfer::kRemoteWrite));
    table_.Insert(RegionTable::WrapForTesting(
        kRegionId + 1, kKey, memory_.data(), 4096, xfer::kRemoteAtomic));
    auto qp =
        QueuePair::Create(*device, xfer::internal::OriginQueuePairOptions());
    ASSERT_TRUE(qp.ok()) << qp.status();
    origin_qp_ = std::move(qp).value();
    auto target =
        VerbsTarget::Accept(*device, origin_qp_->Info(), &table_, "origin",
                            NotifyTarget{}, DeviceMemory::Create());
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = std::move(target).value();
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    origin_fd_ = net::UniqueFd(fds[0]);
    target_->Start(net::UniqueFd(fds[1]));
  }

  // One request and the status its reply carries.
  Status Ask(const VerbsControl& request, VerbsControlReply* reply = nullptr) {
    VerbsControlReply got;
    Status s = xfer::internal::SendMessage(origin_fd_.get(), request);
    if (s.ok()) s = xfer::internal::RecvMessage(origin_fd_.get(), &got);
    if (!s.ok()) return s;
    if (reply != nullptr) *reply = got;
    return Status(static_cast<StatusCode>(got.code()), got.message());
  }

  static VerbsControl Staged(VerbsControl::Op op, uint64_t offset,
                             uint64_t length, uint64_t piece = 0) {
    VerbsControl r;
    r.set_op(op);
    r.set_region_id(kRegionId);
    r.set_key(kKey);
    r.set_instance(kInstance);
    r.set_offset(offset);
    r.set_length(length);
    r.set_piece(piece);
    return r;
  }

  RegionTable table_{"target", kInstance};
  std::vector<uint8_t> memory_;
  std::unique_ptr<QueuePair> origin_qp_;
  std::unique_ptr<VerbsTarget> target_;
  net::UniqueFd origin_fd_;
};

TEST_P(VerbsTargetTest, StagedRequestsBeforeTheBufferAreRefused) {
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_PUT, 0, 64, 64))
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_GET, 0, 64))
                  .Is(StatusCode::kInvalidArgument));
  // Asked for, the buffer is there, the same each time.
  VerbsControl offer;
  offer.set_op(VerbsControl::STAGING_BUFFER);
  VerbsControlReply first, second;
  ASSERT_TRUE(Ask(offer, &first).ok());
  ASSERT_TRUE(Ask(offer, &second).ok());
  EXPECT_NE(first.staging_address(), 0u);
  EXPECT_EQ(first.staging_bytes(), kStagingBytes);
  EXPECT_EQ(second.staging_address(), first.staging_address());
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_PUT, 0, 64, 64)).ok());
}

TEST_P(VerbsTargetTest, OversizedPiecesAreRefused) {
  VerbsControl offer;
  offer.set_op(VerbsControl::STAGING_BUFFER);
  ASSERT_TRUE(Ask(offer).ok());
  const uint64_t too_big = kStagingBytes + 1;
  // A piece larger than the buffer, or than the segment it starts.
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_PUT, 0, too_big, too_big))
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_PUT, 0, 8, 16))
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_GET, 0, too_big))
                  .Is(StatusCode::kInvalidArgument));
  // The whole segment is checked, not only its first piece.
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_PUT, kRegionBytes - 64, 128, 64))
                  .Is(StatusCode::kOutOfRange));
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_GET, ~0ull - 4, 16))
                  .Is(StatusCode::kOutOfRange));
  VerbsControl unknown = Staged(VerbsControl::STAGED_GET, 0, 8);
  unknown.set_op(static_cast<VerbsControl::Op>(99));
  EXPECT_TRUE(Ask(unknown).Is(StatusCode::kInvalidArgument));
  // Still serving.
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_GET, 0, 4096)).ok());
}

TEST_P(VerbsTargetTest, StagedRequestsAreCheckedLikeAnyOther) {
  VerbsControl offer;
  offer.set_op(VerbsControl::STAGING_BUFFER);
  ASSERT_TRUE(Ask(offer).ok());
  VerbsControl bad_key = Staged(VerbsControl::STAGED_PUT, 0, 8, 8);
  bad_key.set_key(kKey + 1);
  EXPECT_TRUE(Ask(bad_key).Is(StatusCode::kInvalidKey));
  VerbsControl stale = Staged(VerbsControl::STAGED_GET, 0, 8);
  stale.set_instance(kInstance + 1);
  EXPECT_TRUE(Ask(stale).Is(StatusCode::kStaleDescriptor));
  VerbsControl gone = Staged(VerbsControl::STAGED_GET, 0, 8);
  gone.set_region_id(99);
  EXPECT_TRUE(Ask(gone).Is(StatusCode::kNotRegistered));
  // Atomics: refused by access on a data region, and refused as staged on a
  // region that allows them.
  EXPECT_TRUE(Ask(Staged(VerbsControl::STAGED_ATOMIC, 0, 8))
                  .Is(StatusCode::kAccessDenied));
  VerbsControl atomic = Staged(VerbsControl::STAGED_ATOMIC, 0, 8);
  atomic.set_region_id(kRegionId + 1);
  EXPECT_TRUE(Ask(atomic).Is(StatusCode::kNotSupported));
  VerbsControl read = Staged(VerbsControl::STAGED_GET, 0, 8);
  read.set_region_id(kRegionId + 1);
  EXPECT_TRUE(Ask(read).Is(StatusCode::kAccessDenied));
}

INSTANTIATE_TEST_SUITE_P(Verbs, VerbsTargetTest,
                         ::testing::Values(TransportChoice::kVerbs),
                         [](const auto& info) {
                           return TransportLabel(info.param);
                         });

}  // namespace
}  // namespace ps::testing
