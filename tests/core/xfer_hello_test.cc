// The xfer hello under hostile peers, and the cluster secret.
//
// In one process, real sockets on 127.0.0.1: a listener whose peers stay
// silent, drip a valid hello byte by byte, or never answer must neither
// delay other connections nor hang the connecting side; a peer without the
// cluster secret (or with another) gets nothing; an unknown request is
// answered with an error before the connection closes; a hello the
// listener gave up (loss on the path) is dialed again.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "core/auth.h"
#include "core/context.h"
#include "core/internal/hello.h"
#include "core/stream/wire.h"
#include "net/connect.h"
#include "net/message_frame.h"
#include "net/transfer.h"
#include "tests/core/tcp_proxy.h"
#include "tests/fixed_time_zone.h"

namespace ps::testing {
namespace {

using net::ConnectTcp;
using net::DeadlineIn;
using net::UniqueFd;
using xfer::ClusterSecret;
using xfer::Context;
using xfer::ContextOptions;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

ContextOptions Options(const std::string& name, int timeout_ms = 10000,
                       ClusterSecret secret = {}) {
  ContextOptions o;
  o.name = name;
  o.transport = xfer::TransportChoice::kTcp;
  o.peer_timeout_ms = timeout_ms;
  o.secret = std::move(secret);
  return o;
}

ClusterSecret Secret(const std::string& bytes) {
  return ClusterSecret::FromBytes(bytes).value();
}

TEST(XferHelloTest, SilentConnectionsDelayNobody) {
  auto target = Context::Create(Options("target")).value();
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 10; ++i) {
    silent.push_back(ConnectTcp(target->address(), 2000).value());
  }
  auto origin = Context::Create(Options("origin")).value();
  const auto start = Clock::now();
  auto ep = origin->Connect(target->address());
  const double took = SecondsSince(start);
  ASSERT_TRUE(ep.ok()) << ep.status();
  // Before: the accept loop read each hello inline, 2 s per silent peer.
  EXPECT_LT(took, 1.0) << "connecting behind 10 silent peers took " << took
                       << " s";
  std::printf("connected behind 10 silent peers in %.4f s\n", took);
}

TEST(XferHelloTest, ADrippedHelloHasOneDeadlineAndBlocksNobody) {
  ContextOptions o = Options("target");
  o.handshake_timeout_ms = 1000;
  auto target = Context::Create(o).value();
  UniqueFd drip = ConnectTcp(target->address(), 2000).value();
  // A length prefix of a valid 60,000-byte hello, then a byte at a time.
  const uint32_t length = 60000;
  ASSERT_EQ(send(drip.get(), &length, 4, MSG_NOSIGNAL), 4);
  std::atomic<bool> stop{false};
  std::atomic<bool> closed{false};
  std::thread dripper([&] {
    char byte = 0x0a;
    while (!stop.load()) {
      if (send(drip.get(), &byte, 1, MSG_NOSIGNAL) != 1) {
        closed.store(true);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto origin = Context::Create(Options("origin")).value();
  const auto start = Clock::now();
  auto ep = origin->Connect(target->address());
  EXPECT_LT(SecondsSince(start), 1.0);
  EXPECT_TRUE(ep.ok()) << ep.status();
  // The dripping peer is cut off at its deadline (1 s), not served for as
  // long as it drips: its sends start failing.
  const auto cut_start = Clock::now();
  while (!closed.load() && SecondsSince(cut_start) < 5.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop.store(true);
  dripper.join();
  EXPECT_TRUE(closed.load()) << "the dripping peer was still served after 5 s";
  std::printf("the dripping peer was cut off %.2f s after the connect\n",
              SecondsSince(cut_start));
}

// A listener that accepts and never answers: Connect must give up at its
// own deadline.
TEST(XferHelloTest, ConnectGivesUpOnASilentListener) {
  UniqueFd listener = net::ListenTcp("127.0.0.1", 0).value();
  const uint16_t port = net::LocalPort(listener.get()).value();
  auto origin = Context::Create(Options("origin", /*timeout_ms=*/500)).value();
  auto result = std::async(std::launch::async, [&] {
    return origin->Connect("127.0.0.1:" + std::to_string(port)).status();
  });
  const auto start = Clock::now();
  const bool done =
      result.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!done) {
    // Unblock the stuck Connect so that the test can end.
    UniqueFd peer = net::Accept(listener.get()).value();
    peer.Reset();
    result.wait();
    FAIL() << "Connect to a silent listener still waited after 5 s";
  }
  const Status s = result.get();
  EXPECT_TRUE(s.Is(StatusCode::kTimeout)) << s;
  EXPECT_LT(SecondsSince(start), 2.0);
}

// A hello that outlasts the listener's handshake deadline (loss on the
// path) is cut off there; Connect dials again while its own deadline allows.
TEST(XferHelloTest, AHelloTheListenerGaveUpIsDialedAgain) {
  ContextOptions o = Options("target");
  o.handshake_timeout_ms = 300;
  auto target = Context::Create(o).value();
  TcpProxy proxy(target->address());
  proxy.SetDroppingRequests(true);  // until the first hello was given up
  std::thread heal([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    proxy.SetDroppingRequests(false);
  });
  auto origin = Context::Create(Options("origin", /*timeout_ms=*/5000)).value();
  auto ep = origin->Connect(proxy.address());
  heal.join();
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_GE(proxy.accepted(), 2);
}

TEST(XferHelloTest, OnlyPeersWithTheSecretConnect) {
  const ClusterSecret ours = Secret("the-cluster-secret-0123456789");
  auto target = Context::Create(Options("target", 5000, ours)).value();
  auto friend_ctx = Context::Create(Options("friend", 5000, ours)).value();
  auto ep = friend_ctx->Connect(target->address());
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto region = target->Allocate(4096, xfer::kRemoteRead).value();
  auto imported = (*ep)->Import(region->descriptor());
  ASSERT_TRUE(imported.ok()) << imported.status();
  uint64_t word = 0;
  EXPECT_TRUE((*ep)->Get(&word, 8, *imported, 0).ok());

  auto stranger = Context::Create(Options("stranger", 5000)).value();
  auto refused = stranger->Connect(target->address());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().Is(StatusCode::kUnauthenticated))
      << refused.status();

  auto impostor = Context::Create(Options("impostor", 5000,
                                          Secret("another-secret-abcdefgh")))
                      .value();
  refused = impostor->Connect(target->address());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().Is(StatusCode::kUnauthenticated))
      << refused.status();

  // A connector with the secret does not trust a listener without one.
  auto open_target = Context::Create(Options("open-target", 5000)).value();
  refused = friend_ctx->Connect(open_target->address());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().Is(StatusCode::kUnauthenticated))
      << refused.status();
}

TEST(XferHelloTest, NoKeyBeforeTheProof) {
  // A raw peer that sends a hello without a nonce to a listener with a
  // secret gets a refusal and no socket name, no instance.
  const ClusterSecret ours = Secret("the-cluster-secret-0123456789");
  auto target = Context::Create(Options("target", 5000, ours)).value();
  UniqueFd fd = ConnectTcp(target->address(), 2000).value();
  xfer::proto::Hello hello;
  hello.set_name("raw");
  ASSERT_TRUE(net::SendMessage(fd.get(), hello, DeadlineIn(2000)).ok());
  xfer::proto::HelloReply reply;
  ASSERT_TRUE(
      xfer::internal::RecvMessage(fd.get(), &reply, DeadlineIn(2000)).ok());
  EXPECT_FALSE(reply.error().empty());
  EXPECT_EQ(reply.answers_size(), 0);  // no transport facts (socket name)
  EXPECT_EQ(reply.instance(), 0u);
}

TEST(XferHelloTest, ListeningBeyondLoopbackNeedsASecret) {
  ContextOptions o = Options("wide");
  o.listen_host = "0.0.0.0";
  auto refused = Context::Create(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().Is(StatusCode::kInvalidArgument))
      << refused.status();
  EXPECT_NE(refused.status().message().find("secret"), std::string::npos);
  o.secret = Secret("the-cluster-secret-0123456789");
  EXPECT_TRUE(Context::Create(o).ok());
}

TEST(XferHelloTest, AnUnknownOpIsAnsweredBeforeTheConnectionCloses) {
  auto target = Context::Create(Options("target")).value();
  UniqueFd fd = ConnectTcp(target->address(), 2000).value();
  xfer::proto::Hello hello;
  hello.set_name("raw");
  ASSERT_TRUE(net::SendMessage(fd.get(), hello, DeadlineIn(2000)).ok());
  xfer::proto::HelloReply reply;
  ASSERT_TRUE(
      xfer::internal::RecvMessage(fd.get(), &reply, DeadlineIn(2000)).ok());
  ASSERT_TRUE(reply.error().empty()) << reply.error();
  namespace wire = xfer::internal::wire;
  wire::RequestHeader h{};
  h.magic = wire::kRequestMagic;
  h.op = 99;
  h.request_id = 7;
  ASSERT_TRUE(
      net::SendAllBefore(fd.get(), &h, sizeof(h), DeadlineIn(2000), "request")
          .ok());
  wire::ReplyHeader r{};
  ASSERT_TRUE(
      net::RecvAllBefore(fd.get(), &r, sizeof(r), DeadlineIn(2000), "reply")
          .ok());
  EXPECT_EQ(r.request_id, 7u);
  EXPECT_EQ(r.status_code, static_cast<uint16_t>(StatusCode::kInvalidArgument));
  std::string message(r.message_length, '\0');
  ASSERT_TRUE(net::RecvAllBefore(fd.get(), message.data(), message.size(),
                                 DeadlineIn(2000), "message")
                  .ok());
  EXPECT_NE(message.find("unknown op 99"), std::string::npos) << message;
  char byte;
  EXPECT_EQ(recv(fd.get(), &byte, 1, 0), 0) << "the connection stayed open";
}

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("xfer-secret-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content,
                    mode_t mode) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << content;
    chmod(path.c_str(), mode);
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(SecretFileTest, ReadsAKeyFileAndRefusesBadOnes) {
  const std::string good = Write("good", "0123456789abcdef0123\n", 0600);
  auto secret = ClusterSecret::FromFile(good);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_FALSE(secret->empty());
  // The same file content (newline dropped) proves what FromBytes proves.
  const ClusterSecret same = Secret("0123456789abcdef0123");
  const std::string a(32, 'a'), b(32, 'b');
  const std::string proof =
      secret->Prove("t", xfer::AuthRole::kConnector, a, b);
  EXPECT_TRUE(same.Verify("t", xfer::AuthRole::kConnector, a, b, proof));
  EXPECT_FALSE(same.Verify("t", xfer::AuthRole::kAcceptor, a, b, proof));
  EXPECT_FALSE(same.Verify("t", xfer::AuthRole::kConnector, b, a, proof));
  EXPECT_FALSE(Secret("another-secret-abcdefgh")
                   .Verify("t", xfer::AuthRole::kConnector, a, b, proof));

  auto open = ClusterSecret::FromFile(Write("open", "0123456789abcdef", 0644));
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos);
  auto shorty = ClusterSecret::FromFile(Write("short", "tiny", 0600));
  ASSERT_FALSE(shorty.ok());
  EXPECT_NE(shorty.status().message().find("too short"), std::string::npos);
  EXPECT_FALSE(ClusterSecret::FromFile((dir_ / "missing").string()).ok());

  // Resolve: the flag first, then the environment.
  setenv("PS_CLUSTER_SECRET", "secret-from-the-environment", 1);
  auto env = ClusterSecret::Resolve("", environ);
  unsetenv("PS_CLUSTER_SECRET");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->empty());
  auto none = ClusterSecret::Resolve("", environ);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Group read is allowed (Kubernetes mounts a Secret 0440, root:fsGroup);
// group write and every bit for other users are refused, saying the fix.
TEST_F(SecretFileTest, GroupMayReadButNotWrite) {
  const std::string key = "0123456789abcdef0123";
  for (mode_t mode : {0600, 0400, 0640, 0440}) {
    auto secret =
        ClusterSecret::FromFile(Write("ok-" + std::to_string(mode), key, mode));
    EXPECT_TRUE(secret.ok()) << std::oct << mode << ": " << secret.status();
  }
  for (mode_t mode : {0660, 0620, 0606, 0604, 0602, 0601}) {
    auto secret = ClusterSecret::FromFile(
        Write("bad-" + std::to_string(mode), key, mode));
    ASSERT_FALSE(secret.ok()) << std::oct << mode;
    EXPECT_TRUE(secret.status().Is(StatusCode::kInvalidArgument));
    EXPECT_NE(secret.status().message().find("chmod 600"), std::string::npos)
        << secret.status();
  }
}

// The path is opened, then the descriptor checked and read: a symlink is
// followed (Kubernetes' Secret volumes are symlinks) and the file it
// reaches is what is checked; a FIFO is refused at once, not waited on.
TEST_F(SecretFileTest, SymlinksAreFollowedAndFifosRefusedAtOnce) {
  const std::string good = Write("good", "0123456789abcdef0123\n", 0440);
  const std::string link = (dir_ / "link").string();
  ASSERT_EQ(symlink(good.c_str(), link.c_str()), 0);
  auto secret = ClusterSecret::FromFile(link);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(secret->bytes(), "0123456789abcdef0123");
  EXPECT_EQ(secret->file(), link);
  const std::string bad_link = (dir_ / "bad-link").string();
  const std::string bad = Write("bad", "0123456789abcdef0123", 0660);
  ASSERT_EQ(symlink(bad.c_str(), bad_link.c_str()), 0);
  EXPECT_FALSE(ClusterSecret::FromFile(bad_link).ok());

  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto read = std::async(std::launch::async,
                         [&] { return ClusterSecret::FromFile(fifo); });
  if (read.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "FromFile waits for a writer of the FIFO";
    // Be that writer, so that the test ends.
    close(open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
  }
  auto from_fifo = read.get();
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_NE(from_fifo.status().message().find("not a regular file"),
            std::string::npos)
      << from_fifo.status();
}

// A key file someone else owns could be changed by them: refused, unless
// root owns it (root reads everything anyway; a Kubernetes Secret's files
// belong to root).
TEST_F(SecretFileTest, AFileOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown a file away";
  const std::string path = Write("theirs", "0123456789abcdef0123", 0600);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  auto theirs = ClusterSecret::FromFile(path);
  ASSERT_FALSE(theirs.ok());
  EXPECT_NE(theirs.status().message().find("belongs to uid 65534"),
            std::string::npos)
      << theirs.status();
  EXPECT_NE(theirs.status().message().find("chown"), std::string::npos);
  // root:65534 0440, as Kubernetes mounts it.
  ASSERT_EQ(chown(path.c_str(), 0, 65534), 0);
  ASSERT_EQ(chmod(path.c_str(), 0440), 0);
  EXPECT_TRUE(ClusterSecret::FromFile(path).ok());
}

// ResolveForProgram wipes the value from the environment in place (where
// the pointer getenv gave still points) and remembers what it resolved;
// Resolve leaves the environment alone (the Python package calls it).
TEST_F(SecretFileTest, ResolveForProgramWipesTheValueResolveLeavesIt) {
  const std::string value = "secret-from-the-environment";
  setenv("PS_CLUSTER_SECRET", value.c_str(), 1);
  unsetenv("PS_CLUSTER_SECRET_FILE");
  auto plain = ClusterSecret::Resolve("", environ);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(std::getenv("PS_CLUSTER_SECRET"), value);

  const char* entry = std::getenv("PS_CLUSTER_SECRET");
  auto secret = ClusterSecret::ResolveForProgram("", environ);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(secret->bytes(), value);
  EXPECT_TRUE(secret->file().empty());
  EXPECT_EQ(std::string(entry, value.size()), std::string(value.size(), '\0'))
      << "the bytes getenv pointed to still hold the value";
  // A second resolve finds no secret: pass the first result on.
  auto again = ClusterSecret::Resolve("", environ);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());

  // A key file wins, and the value is wiped all the same.
  setenv("PS_CLUSTER_SECRET", value.c_str(), 1);
  const std::string key = Write("key", "0123456789abcdef0123", 0600);
  auto from_file = ClusterSecret::ResolveForProgram(key, environ);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->file(), key);
  EXPECT_STREQ(std::getenv("PS_CLUSTER_SECRET"), "");
  unsetenv("PS_CLUSTER_SECRET");
}

}  // namespace
}  // namespace ps::testing
