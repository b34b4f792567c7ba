// StreamTransport against a raw peer in place of the StreamServer, and a
// StreamServer against a raw origin, over a Unix socketpair and a loopback
// TCP connection: peers that close mid-transfer, go silent or stop reading
// are declared lost in time; an idle connection is not; a server closes on
// garbage and on a payload it cannot skip.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/internal/op.h"
#include "core/internal/region_table.h"
#include "core/remote_region.h"
#include "core/request.h"
#include "core/stream/stream_server.h"
#include "core/stream/stream_transport.h"
#include "core/stream/wire.h"
#include "net/connect.h"
#include "net/transfer.h"
#include "tests/core/stream_test_sockets.h"

namespace ps::xfer::internal {
namespace {

using net::RecvAll;
using net::SendAll;
using net::Skip;
using net::UniqueFd;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A raw peer in place of the StreamServer, for the failure cases.
class RawPeerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void Start(milliseconds timeout) {
    auto [origin, target] = Connect(GetParam());
    peer_ = std::move(target);
    transport_ = std::make_unique<StreamTransport>(std::move(origin),
                                                   "server-1", timeout);
    region_ = RemoteRegion::ForTesting(1, 2, uint64_t{1} << 30, kRemoteAll,
                                       kInstance, "server-1");
  }
  UniqueFd peer_;
  std::unique_ptr<StreamTransport> transport_;
  RemoteRegion region_;
};

TEST_P(RawPeerTest, PeerClosingMidTransferFailsFast) {
  Start(kPatientTimeout);
  std::thread peer([this] {
    char buf[1000];
    (void)RecvAll(peer_.get(), buf, sizeof(buf));
    peer_.Reset();
  });
  std::vector<char> big(16 << 20);
  auto start = Clock::now();
  Request put = transport_->Post(
      MakeOp(OpType::kPut, region_, big.data(), 0, big.size()));
  Status s = put.Wait();
  auto elapsed = Clock::now() - start;
  peer.join();
  EXPECT_TRUE(s.Is(StatusCode::kPeerLost)) << s;
  EXPECT_NE(s.message().find("server-1"), std::string::npos) << s;
  EXPECT_LT(elapsed, std::chrono::seconds(5));  // slack for sanitizers
  EXPECT_TRUE(transport_->lost());
  // Later operations fail at once.
  start = Clock::now();
  Status again =
      transport_->Post(MakeOp(OpType::kGet, region_, big.data(), 0, 8)).Wait();
  EXPECT_TRUE(again.Is(StatusCode::kPeerLost)) << again;
  EXPECT_LT(Clock::now() - start, milliseconds(100));
  EXPECT_TRUE(transport_->Flush().Is(StatusCode::kPeerLost));
}

TEST_P(RawPeerTest, SilentPeerIsLostAfterTheTimeout) {
  Start(milliseconds(300));
  char buf[64];
  auto start = Clock::now();
  Request get = transport_->Post(MakeOp(OpType::kGet, region_, buf, 0, 64));
  Status s = get.Wait();
  auto elapsed = Clock::now() - start;
  EXPECT_TRUE(s.Is(StatusCode::kPeerLost)) << s;
  EXPECT_GE(elapsed, milliseconds(250));
  EXPECT_LT(elapsed, milliseconds(3000));
  EXPECT_TRUE(transport_->lost());
}

TEST_P(RawPeerTest, SilentPeerThatStopsReadingIsLostToo) {
  // The peer never reads: a large put fills the socket buffers and the
  // sender stalls; the timeout frees it.
  Start(milliseconds(300));
  std::vector<char> big(64 << 20);
  auto start = Clock::now();
  Status s =
      transport_->Post(MakeOp(OpType::kPut, region_, big.data(), 0, big.size()))
          .Wait();
  EXPECT_TRUE(s.Is(StatusCode::kPeerLost)) << s;
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  s = transport_->Flush();
  EXPECT_TRUE(s.Is(StatusCode::kPeerLost)) << s;
}

TEST_P(RawPeerTest, IdleConnectionIsNotLost) {
  // No request outstanding: a quiet peer is fine however long it is quiet.
  Start(milliseconds(100));
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_FALSE(transport_->lost());
  EXPECT_TRUE(transport_->Flush().ok());
}

TEST_P(RawPeerTest, ClosingTheTransportFailsPendingRequests) {
  Start(kPatientTimeout);
  char buf[64];
  Request get = transport_->Post(MakeOp(OpType::kGet, region_, buf, 0, 64));
  auto start = Clock::now();
  transport_.reset();
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  Status s;
  ASSERT_TRUE(get.Test(&s));
  EXPECT_TRUE(s.Is(StatusCode::kPeerLost)) << s;
}

TEST_P(RawPeerTest, ServerClosesOnGarbageAndOnUnskippablePayload) {
  RegionTable table("server-1", kInstance);
  for (int variant = 0; variant < 2; ++variant) {
    auto [origin, target] = Connect(GetParam());
    StreamServer server(std::move(target), &table, "worker-2", nullptr);
    wire::RequestHeader h;
    h.op = static_cast<uint16_t>(wire::WireOp::kPut);
    h.instance = kInstance;
    h.region_id = 77;  // not registered
    h.length = uint64_t{1} << 30;
    if (variant == 0) h.magic = 0xdeadbeef;
    ASSERT_TRUE(SendAll(origin.get(), &h, sizeof(h)).ok());
    if (variant == 1) {
      // The rejection is answered before the connection closes.
      wire::ReplyHeader reply;
      ASSERT_TRUE(RecvAll(origin.get(), &reply, sizeof(reply)).ok());
      EXPECT_EQ(reply.status_code,
                static_cast<uint16_t>(StatusCode::kNotRegistered));
      ASSERT_TRUE(Skip(origin.get(), reply.message_length).ok());
    }
    char byte;
    EXPECT_EQ(recv(origin.get(), &byte, 1, 0), 0) << "server must close";
    for (int i = 0; i < 200 && !server.finished(); ++i) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_TRUE(server.finished());
  }
}

INSTANTIATE_TEST_SUITE_P(Sockets, RawPeerTest, ::testing::Values("unix", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ps::xfer::internal
