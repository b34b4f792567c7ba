// The control channel against slow, silent and hostile peers (in one
// process, real sockets on 127.0.0.1): a slow request is kept alive by the
// server, a silent server fails the call at the client's deadline, length
// prefixes allocate nothing, held connections are capped and timed out, and
// with a cluster secret nothing is answered before the proof.
#include "server/control_service.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "net/connect.h"
#include "net/transfer.h"
#include "protocol/control_channel.h"
#include "tests/fixed_time_zone.h"

namespace ps::server {
namespace {

using Clock = std::chrono::steady_clock;
using net::ConnectTcp;
using net::UniqueFd;
using protocol::ControlClient;
using xfer::ClusterSecret;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Resident memory of this process, in MB.
double RssMb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      status >> kb;
      return kb / 1024;
    }
  }
  return 0;
}

// What the handler answers; it must never reach an unauthenticated peer.
constexpr uint64_t kAnswer = 987654321;

// A service whose handler answers stats after `delay_ms`.
std::unique_ptr<ControlService> StartService(ControlService::Options o,
                                             int delay_ms = 0) {
  auto s = ControlService::Listen(
      std::move(o), [delay_ms](const proto::ControlRequest&, ControlPeer*) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        proto::ControlReply r;
        r.mutable_stats()->set_packets_applied(kAnswer);
        return r;
      });
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Start().ok());
  return std::move(*s);
}

proto::ControlRequest Stats() {
  proto::ControlRequest r;
  r.set_stats(true);
  return r;
}

ControlClient::Options Client(int timeout_ms, ClusterSecret secret = {}) {
  return {.timeout_ms = timeout_ms, .secret = std::move(secret)};
}

// True once the server closed `fd` (recv sees EOF or a reset) within
// `seconds`; anything the server sent first is skipped.
bool ClosedWithin(int fd, double seconds) {
  const auto start = Clock::now();
  timeval tv{0, 100 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  while (SecondsSince(start) < seconds) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return true;
    }
  }
  return false;
}

TEST(ControlServiceTest, ASlowRequestIsKeptAlive) {
  auto service = StartService({}, /*delay_ms=*/2000);
  auto client = ControlClient::Connect(service->address(), Client(1000));
  ASSERT_TRUE(client.ok()) << client.status();
  // Twice the client's timeout, yet alive: keepalives every 250 ms.
  auto reply = client->Call(Stats());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->stats().packets_applied(), kAnswer);
}

TEST(ControlServiceTest, ACallToASilentServerTimesOut) {
  // Silent from the start: the handshake times out.
  UniqueFd silent_listener = net::ListenTcp("127.0.0.1", 0).value();
  const uint16_t silent_port = net::LocalPort(silent_listener.get()).value();
  auto start = Clock::now();
  auto silent = ControlClient::Connect(
      "127.0.0.1:" + std::to_string(silent_port), Client(300));
  ASSERT_FALSE(silent.ok());
  EXPECT_TRUE(silent.status().Is(StatusCode::kTimeout)) << silent.status();
  EXPECT_LT(SecondsSince(start), 1.5);

  // Silent after the handshake: the call times out.
  UniqueFd listener = net::ListenTcp("127.0.0.1", 0).value();
  const uint16_t port = net::LocalPort(listener.get()).value();
  std::thread server([&] {
    UniqueFd c = net::Accept(listener.get()).value();
    proto::ControlRequest auth;
    Status s = protocol::RecvControlMessage(c.get(), &auth,
                                            net::DeadlineIn(2000), 2000);
    proto::ControlReply reply;
    reply.mutable_auth();  // no secret, nothing to prove
    if (s.ok()) {
      s = protocol::SendControlMessage(c.get(), reply, net::DeadlineIn(1000));
    }
    EXPECT_TRUE(s.ok()) << s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  });
  auto client =
      ControlClient::Connect("127.0.0.1:" + std::to_string(port), Client(300));
  ASSERT_TRUE(client.ok()) << client.status();
  start = Clock::now();
  auto reply = client->Call(Stats());
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(reply.status().Is(StatusCode::kTimeout)) << reply.status();
  EXPECT_LT(SecondsSince(start), 1.5);
  // The connection is given up: the next call fails at once.
  reply = client->Call(Stats());
  EXPECT_FALSE(reply.ok());
  server.join();
}

TEST(ControlServiceTest, LengthPrefixesAllocateNothing) {
  ControlService::Options o;
  o.max_connections = 8;
  auto service = StartService(o);
  const double before = RssMb();
  std::vector<UniqueFd> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(ConnectTcp(service->address(), 2000).value());
    const uint32_t length = protocol::kMaxControlMessageBytes;
    ASSERT_EQ(send(held.back().get(), &length, 4, MSG_NOSIGNAL), 4);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double grown = RssMb() - before;
  // Before: each prefix made the server allocate and zero 256 MiB.
  EXPECT_LT(grown, 64) << "4 held 256 MiB length prefixes grew RSS by " << grown
                       << " MB";
  // The service still answers.
  auto client = ControlClient::Connect(service->address(), Client(2000));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE(client->Call(Stats()).ok());
}

TEST(ControlServiceTest, ConnectionsAreCappedAndTheRefusedOneClosedAtOnce) {
  ControlService::Options o;
  o.max_connections = 3;
  auto service = StartService(o);
  std::vector<ControlClient> clients;
  for (int i = 0; i < 3; ++i) {
    auto c = ControlClient::Connect(service->address(), Client(2000));
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(c->Call(Stats()).ok());
    clients.push_back(std::move(*c));
  }
  // Told why at the end of its handshake.
  const auto start = Clock::now();
  auto refused = ControlClient::Connect(service->address(), Client(2000));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().Is(StatusCode::kResourceExhausted))
      << refused.status();
  EXPECT_LT(SecondsSince(start), 1.0);
  // A slot frees when a client leaves.
  clients.pop_back();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto again = ControlClient::Connect(service->address(), Client(2000));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->Call(Stats()).ok());
}

TEST(ControlServiceTest, HeldAndStalledConnectionsAreClosedAtTheirDeadline) {
  ControlService::Options o;
  o.handshake_timeout_ms = 500;
  auto service = StartService(o);
  // Silent from the start.
  UniqueFd silent = ConnectTcp(service->address(), 2000).value();
  // A message that stops half-way.
  UniqueFd stalled = ConnectTcp(service->address(), 2000).value();
  const uint32_t length = 100;
  ASSERT_EQ(send(stalled.get(), &length, 4, MSG_NOSIGNAL), 4);
  ASSERT_EQ(send(stalled.get(), "0123456789", 10, MSG_NOSIGNAL), 10);
  EXPECT_TRUE(ClosedWithin(silent.get(), 3.0));
  EXPECT_TRUE(ClosedWithin(stalled.get(), 3.0));
}

TEST(ControlServiceTest, NothingIsAnsweredBeforeTheProof) {
  const ClusterSecret ours =
      ClusterSecret::FromBytes("the-cluster-secret-0123456789").value();
  const ClusterSecret other =
      ClusterSecret::FromBytes("another-secret-abcdefgh").value();
  ControlService::Options o;
  o.secret = ours;
  auto service = StartService(o);

  auto member = ControlClient::Connect(service->address(), Client(2000, ours));
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_TRUE(member->Call(Stats()).ok());

  // A client without the secret learns that it needs one, nothing else.
  auto stranger = ControlClient::Connect(service->address(), Client(2000));
  ASSERT_FALSE(stranger.ok());
  EXPECT_TRUE(stranger.status().Is(StatusCode::kUnauthenticated))
      << stranger.status();
  // A raw request before any AUTH is refused, and the handler never runs.
  UniqueFd raw = ConnectTcp(service->address(), 2000).value();
  ASSERT_TRUE(
      protocol::SendControlMessage(raw.get(), Stats(), net::DeadlineIn(1000))
          .ok());
  proto::ControlReply refused;
  ASSERT_TRUE(protocol::RecvControlMessage(raw.get(), &refused,
                                           net::DeadlineIn(2000), 2000)
                  .ok());
  EXPECT_EQ(refused.error_code(),
            static_cast<uint32_t>(StatusCode::kUnauthenticated));
  EXPECT_FALSE(refused.has_stats());
  EXPECT_TRUE(ClosedWithin(raw.get(), 2.0));

  auto impostor =
      ControlClient::Connect(service->address(), Client(2000, other));
  ASSERT_FALSE(impostor.ok());
  EXPECT_TRUE(impostor.status().Is(StatusCode::kUnauthenticated))
      << impostor.status();

  // A client with a secret does not trust a server without one.
  auto open = StartService({});
  auto wary = ControlClient::Connect(open->address(), Client(2000, ours));
  ASSERT_FALSE(wary.ok());
  EXPECT_TRUE(wary.status().Is(StatusCode::kUnauthenticated)) << wary.status();

  ControlService::Options wide;
  wide.host = "0.0.0.0";
  EXPECT_FALSE(ControlService::Listen(wide, {}).ok());
}

}  // namespace
}  // namespace ps::server
