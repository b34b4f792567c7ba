// The control channel's reconnect (protocol/control_channel.h) through a
// relay that resets connections while both ends live
// (tests/core/tcp_proxy.h): a call on a connection reset while idle goes out
// on a new one, after the rejoin request; a query whose reply was lost is
// asked again; a request that must not run twice (an exact-key push) is not
// sent again and fails; a server that exits is not redialed. And the first
// connect: a handshake the server gave up is dialed again.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "protocol/control_channel.h"
#include "server/control_service.h"
#include "tests/core/tcp_proxy.h"
#include "tests/fixed_time_zone.h"

namespace ps::server {
namespace {

using protocol::ControlClient;
using Clock = std::chrono::steady_clock;

class ControlReconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControlService::Options o;
    o.timeout_ms = 5000;
    auto s = ControlService::Listen(
        o, [this](const proto::ControlRequest& r, ControlPeer* peer) {
          return Handle(r, peer);
        });
    ASSERT_TRUE(s.ok()) << s.status();
    service_ = std::move(*s);
    ASSERT_TRUE(service_->Start().ok());
    proxy_ = std::make_unique<testing::TcpProxy>(service_->address());
    proto::ControlRequest hello;
    hello.mutable_hello()->set_worker_id(3);
    auto c = ControlClient::Connect(proxy_->address(),
                                    {.timeout_ms = 3000, .secret = {}});
    ASSERT_TRUE(c.ok()) << c.status();
    client_.emplace(std::move(*c));
    client_->EnableReconnect(hello);
    ASSERT_TRUE(client_->Call(hello).ok());
  }

  proto::ControlReply Handle(const proto::ControlRequest& r,
                             ControlPeer* peer) {
    proto::ControlReply reply;
    if (r.has_hello()) {
      hellos_.fetch_add(1);
      peer->worker_id = r.hello().worker_id();
      return reply;
    }
    // Every request after a hello knows its worker.
    if (peer->worker_id != 3) {
      protocol::SetControlError(InvalidArgument("no hello first"), &reply);
      return reply;
    }
    if (r.has_exact_push()) pushes_.fetch_add(1);
    if (r.has_stats()) stats_.fetch_add(1);
    // The reply is lost: the relay breaks the connection before it goes.
    if (lose_next_reply_.exchange(false)) {
      proxy_->Reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return reply;
  }

  static proto::ControlRequest Stats() {
    proto::ControlRequest r;
    r.set_stats(true);
    return r;
  }
  static proto::ControlRequest Push() {
    proto::ControlRequest r;
    r.mutable_exact_push()->set_table_id(1);
    return r;
  }

  std::atomic<int> hellos_{0}, pushes_{0}, stats_{0};
  std::atomic<bool> lose_next_reply_{false};
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<testing::TcpProxy> proxy_;
  std::optional<ControlClient> client_;
};

TEST_F(ControlReconnectTest, IdleResetIsReconnectedWithRejoinFirst) {
  proxy_->Reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Not a query: it never left, so it is safe on the new connection.
  auto r = client_->Call(Push());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(pushes_.load(), 1);
  EXPECT_EQ(hellos_.load(), 2);  // the first, and the rejoin
}

TEST_F(ControlReconnectTest, LostReplyOfAQueryIsAskedAgain) {
  lose_next_reply_ = true;
  auto r = client_->Call(Stats());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stats_.load(), 2);
}

TEST_F(ControlReconnectTest, LostReplyOfAPushIsNotRepeated) {
  lose_next_reply_ = true;
  auto r = client_->Call(Push());
  EXPECT_TRUE(r.status().Is(StatusCode::kPeerLost) ||
              r.status().Is(StatusCode::kNetwork))
      << r.status();
  EXPECT_EQ(pushes_.load(), 1);
  // The next call finds its way again.
  ASSERT_TRUE(client_->Call(Stats()).ok());
}

TEST_F(ControlReconnectTest, StoppedServerIsNotWaitedFor) {
  service_.reset();  // closes its connections in order
  const auto start = Clock::now();
  auto r = client_->Call(Stats());
  EXPECT_FALSE(r.ok());
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(2000));
}

// On a lossy path the handshake can outlast the server's handshake deadline;
// the server then closes the connection. Connect dials again rather than
// failing while its own timeout allows.
TEST(ControlConnectTest, AHandshakeTheServerGaveUpIsDialedAgain) {
  ControlService::Options o;
  o.handshake_timeout_ms = 300;
  auto service =
      ControlService::Listen(o, [](const proto::ControlRequest&, ControlPeer*) {
        return proto::ControlReply();
      });
  ASSERT_TRUE(service.ok()) << service.status();
  ASSERT_TRUE((*service)->Start().ok());
  testing::TcpProxy proxy((*service)->address());
  // The client's first message is lost until the server has given the
  // first handshake up (after 300 ms).
  proxy.SetDroppingRequests(true);
  std::thread heal([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    proxy.SetDroppingRequests(false);
  });
  auto c = ControlClient::Connect(proxy.address(),
                                  {.timeout_ms = 5000, .secret = {}});
  heal.join();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GE(proxy.accepted(), 2);
  proto::ControlRequest stats;
  stats.set_stats(true);
  EXPECT_TRUE(c->Call(stats).ok());
}

// A refused connection is not a dropped handshake: it fails at once.
TEST(ControlConnectTest, ARefusedConnectionIsNotRetried) {
  const auto start = Clock::now();
  // Nothing listens on port 1 of the loopback.
  auto c =
      ControlClient::Connect("127.0.0.1:1", {.timeout_ms = 5000, .secret = {}});
  EXPECT_FALSE(c.ok());
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(2000));
}

}  // namespace
}  // namespace ps::server
