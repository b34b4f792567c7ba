// Who may resume a tcp session (core/stream/session_resume.h). The attacker
// knows the live session's id and its connector's instance (it reads them
// off the relay, tests/core/tcp_proxy.h: the hello is clear text) and, with a
// cluster secret, the secret too. Its forged resume, a replayed or far-ahead
// attempt, and a new session that reuses the id are all refused, the real
// session goes on with every operation applied exactly once, and it still
// resumes after a real reset. A request repeated on a resumed session
// (answered from the session's record) has the size limits of a fresh one.
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/auth.h"
#include "core/context.h"
#include "core/descriptor.pb.h"
#include "core/endpoint.h"
#include "core/internal/hello.h"
#include "core/internal/transport_provider.h"
#include "core/stream/session_resume.h"
#include "core/stream/stream.pb.h"
#include "core/stream/wire.h"
#include "net/connect.h"
#include "net/transfer.h"
#include "tests/core/tcp_proxy.h"
#include "tests/fixed_time_zone.h"

namespace ps::xfer {
namespace {

using internal::HelloIdentity;
using net::DeadlineIn;
using net::UniqueFd;
namespace wire = internal::wire;

constexpr int kTimeoutMs = 5000;
constexpr uint64_t kLastAttempt = ~uint64_t{0};
const uint32_t kTcp = internal::ProviderId(TransportKind::kTcp);

ContextOptions Options(const char* name, const ClusterSecret& secret) {
  ContextOptions o;
  o.name = name;
  o.transport = TransportChoice::kTcp;
  o.peer_timeout_ms = kTimeoutMs;
  o.secret = secret;
  return o;
}

// The log lines written while it lives, for a test to read back.
class LogLines : public google::LogSink {
 public:
  LogLines() { google::AddLogSink(this); }
  ~LogLines() override { google::RemoveLogSink(this); }
  using google::LogSink::send;
  void send(google::LogSeverity, const char*, const char*, int,
            const google::LogMessageTime&, const char* message,
            size_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(message, length);
  }
  // Whether one line holds both `a` and `b`.
  bool Has(std::string_view a, std::string_view b) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& l : lines_) {
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// The whole frames (4-byte little-endian length, then the body) at the
// start of `bytes`, at most `max` of them.
std::vector<std::string> Frames(const std::string& bytes, size_t max) {
  std::vector<std::string> frames;
  size_t at = 0;
  while (frames.size() < max && at + 4 <= bytes.size()) {
    uint32_t length = 0;
    std::memcpy(&length, bytes.data() + at, 4);
    if (length > bytes.size() - at - 4) break;
    frames.push_back(bytes.substr(at + 4, length));
    at += 4 + length;
  }
  return frames;
}

// What an eavesdropper reads off a relayed connection: its hello and the
// tcp offer in it.
struct Overheard {
  proto::Hello hello;
  proto::StreamOffer offer;
};

Overheard HelloOf(const testing::TcpProxy::Captured& c) {
  Overheard o;
  std::vector<std::string> frames = Frames(c.from_client, 1);
  EXPECT_EQ(frames.size(), 1u) << "no hello relayed";
  if (frames.empty() || !o.hello.ParseFromString(frames[0])) return o;
  for (const proto::TransportOffer& t : o.hello.offers()) {
    if (t.provider() == kTcp) {
      EXPECT_TRUE(o.offer.ParseFromString(t.offer()));
    }
  }
  return o;
}

// The tcp answer in `reply`, or an empty one.
proto::TransportAnswer TcpAnswer(const proto::HelloReply& reply) {
  for (const proto::TransportAnswer& a : reply.answers()) {
    if (a.provider() == kTcp) return a;
  }
  return {};
}

// The resume token the listener sent on a relayed connection (after the
// challenge, when there is a secret): what only someone who reads the path
// learns.
std::string TokenOf(const testing::TcpProxy::Captured& c) {
  for (const std::string& frame : Frames(c.from_server, 2)) {
    proto::HelloReply reply;
    if (!reply.ParseFromString(frame) || reply.answers_size() == 0) continue;
    proto::StreamAnswer answer;
    if (answer.ParseFromString(TcpAnswer(reply).answer())) {
      return answer.resume_token();
    }
  }
  return "";
}

// A hello from `me` whose only offer is the tcp `offer`, made by `make`
// once the hello's nonce is known (a proof covers it).
template <typename MakeOffer>
proto::Hello HelloWith(const HelloIdentity& me, MakeOffer make) {
  proto::Hello hello = internal::MakeHello(me);
  proto::StreamOffer offer = make(hello);
  proto::TransportOffer* t = hello.add_offers();
  t->set_provider(kTcp);
  t->set_name("tcp");
  t->set_offer(offer.SerializeAsString());
  return hello;
}

proto::StreamOffer Resume(uint64_t session, uint64_t attempt,
                          std::string proof) {
  proto::StreamOffer o;
  o.set_session(session);
  o.set_resume(true);
  o.set_attempt(attempt);
  o.set_resume_proof(std::move(proof));
  return o;
}

// Says `hello` as `me` on a new connection to `address` (the hello, and the
// proof of the secret when `me` has one): the connection and the real reply.
std::pair<UniqueFd, proto::HelloReply> SayHello(const std::string& address,
                                                const HelloIdentity& me,
                                                const proto::Hello& hello) {
  UniqueFd fd = net::ConnectTcp(address, 2000).value();
  auto reply =
      internal::Handshake(me, fd.get(), hello, address, DeadlineIn(2000));
  EXPECT_TRUE(reply.ok()) << reply.status();
  return {std::move(fd), reply.ok() ? *reply : proto::HelloReply()};
}

// Whether the peer closed `fd` (within two seconds) without sending a byte.
bool ClosedWithoutAWord(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 2000) != 1) return false;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// A real session between two contexts through a relay, with or without a
// cluster secret (the parameter), and its hello as the attacker overheard it.
class StreamResumeTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      secret_ =
          ClusterSecret::FromBytes("the-cluster-secret-0123456789").value();
    }
    target_ = Context::Create(Options("target", secret_)).value();
    region_ = target_->Allocate(4096, kRemoteAll).value();
    proxy_ = std::make_unique<testing::TcpProxy>(target_->address());
    origin_ = Context::Create(Options("origin", secret_)).value();
    ep_ = origin_->Connect(proxy_->address()).value();
    remote_ = ep_->Import(region_->descriptor()).value();
    overheard_ = HelloOf(proxy_->captured().at(0));
    ASSERT_NE(overheard_.offer.session(), 0u);
    ASSERT_FALSE(overheard_.offer.resume());
  }

  // The attacker: the victim's name and instance, and the cluster's secret.
  HelloIdentity Attacker(std::string name = "") const {
    return {name.empty() ? overheard_.hello.name() : name,
            overheard_.hello.instance(), "attacker-host", secret_};
  }
  uint64_t session() const { return overheard_.offer.session(); }

  // Fetch-adds 1 to the counter `n` times; each must see the count so far.
  void Count(int n) {
    for (int i = 0; i < n; ++i) {
      auto previous = ep_->FetchAdd64(remote_, 0, 1);
      ASSERT_TRUE(previous.ok()) << previous.status();
      EXPECT_EQ(*previous, count_++);
    }
  }
  uint64_t Counter() const {
    return __atomic_load_n(static_cast<uint64_t*>(region_->data()),
                           __ATOMIC_SEQ_CST);
  }

  // Says `hello` as `me` to the target directly; expects the tcp offer
  // declined for a reason that holds `why`, and the connection closed.
  void ExpectRefused(const HelloIdentity& me, const proto::Hello& hello,
                     std::string_view why) {
    auto [fd, reply] = SayHello(target_->address(), me, hello);
    const proto::TransportAnswer answer = TcpAnswer(reply);
    EXPECT_NE(answer.declined().find(why), std::string::npos)
        << "declined: \"" << answer.declined() << "\"";
    EXPECT_TRUE(answer.answer().empty());
    EXPECT_TRUE(ClosedWithoutAWord(fd.get()));
  }

  ClusterSecret secret_;
  std::unique_ptr<Context> target_;
  std::shared_ptr<MemoryRegion> region_;
  std::unique_ptr<testing::TcpProxy> proxy_;
  std::unique_ptr<Context> origin_;
  std::shared_ptr<Endpoint> ep_;
  RemoteRegion remote_;
  Overheard overheard_;
  uint64_t count_ = 0;
};

// Before: the first forged resume took the session and closed the live
// connection, whose connector then got "a stale resume attempt": lost.
TEST_P(StreamResumeTest, AForgedResumeIsRefusedAndTheSessionGoesOn) {
  LogLines log;
  Count(3);
  // Its name would end a log line and forge the next: escaped there.
  const HelloIdentity attacker = Attacker("origin\nE0101 forged");
  for (const std::string& proof : {std::string(), NewNonce()}) {
    for (uint64_t attempt : {kLastAttempt, uint64_t{1}}) {
      ExpectRefused(attacker,
                    HelloWith(attacker,
                              [&](const proto::Hello&) {
                                return Resume(session(), attempt, proof);
                              }),
                    "does not prove the session's resume token");
    }
  }
  // The name comes out escaped once, never as a line break.
  EXPECT_TRUE(log.Has("refused the tcp session offer of origin\\nE0101 forged",
                      "does not prove"));
  EXPECT_FALSE(log.Has("\nE0101", "")) << "a peer's name forged a log line";
  Count(3);
  EXPECT_FALSE(ep_->lost());
  // A real reset: the connector still resumes (attempt 1 is its).
  proxy_->Reset();
  Count(2);
  EXPECT_EQ(Counter(), 8u);
  EXPECT_EQ(target_->link_stats().resumed, 1u);
  EXPECT_EQ(origin_->link_stats().reconnects, 1u);
}

// Proofs that are right (the test reads the token off the relay, as only
// someone on the path could) for an attempt taken already (a replay of the
// real resume, byte for byte) or too far ahead are refused.
TEST_P(StreamResumeTest, ReplayedAndFarAheadAttemptsAreRefused) {
  Count(1);
  proxy_->Reset();
  Count(1);
  const auto captured = proxy_->captured();
  const Overheard resumed = HelloOf(captured.back());
  ASSERT_TRUE(resumed.offer.resume());
  ASSERT_EQ(resumed.offer.session(), session());
  const uint64_t last = resumed.offer.attempt();
  const std::string token = TokenOf(captured.at(0));
  EXPECT_EQ(token.size(), internal::kResumeTokenBytes);
  // The test makes proofs as the connector does.
  EXPECT_EQ(
      internal::ResumeProof(token, session(), last, resumed.hello.auth_nonce()),
      resumed.offer.resume_proof());

  ExpectRefused(Attacker(), resumed.hello, "stale resume attempt");
  const uint64_t window =
      internal::ResumeWindow(std::chrono::milliseconds(kTimeoutMs));
  for (uint64_t attempt : {last + window + 1, kLastAttempt}) {
    ExpectRefused(Attacker(),
                  HelloWith(Attacker(),
                            [&](const proto::Hello& h) {
                              return Resume(session(), attempt,
                                            internal::ResumeProof(
                                                token, session(), attempt,
                                                h.auth_nonce()));
                            }),
                  "above the last taken");
  }
  Count(2);
  proxy_->Reset();
  Count(1);
  EXPECT_EQ(Counter(), 5u);
  EXPECT_EQ(target_->link_stats().resumed, 2u);
}

// A new session that names the live one's id is declined, and the session
// keeps what it applied: a fetch-add whose reply was lost is answered from
// its record after the resume, not added again. Before: the offer replaced
// the session with an empty one, and the resumed fetch-add added twice.
TEST_P(StreamResumeTest, AReusedSessionIdIsRefusedAndExactlyOnceHolds) {
  Count(2);
  proxy_->SetDroppingReplies(true);
  auto add = std::async(std::launch::async,
                        [&] { return ep_->FetchAdd64(remote_, 0, 1); });
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while ((Counter() != 3 || proxy_->dropped() < sizeof(wire::ReplyHeader)) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(Counter(), 3u);
  ASSERT_GE(proxy_->dropped(), sizeof(wire::ReplyHeader));

  {
    proto::StreamOffer fresh;
    fresh.set_session(session());
    const HelloIdentity attacker = Attacker();
    auto [fd, reply] = SayHello(
        target_->address(), attacker,
        HelloWith(attacker, [&](const proto::Hello&) { return fresh; }));
    const proto::TransportAnswer answer = TcpAnswer(reply);
    EXPECT_NE(answer.declined().find("is in use"), std::string::npos)
        << "declined: \"" << answer.declined() << "\"";
    EXPECT_TRUE(answer.answer().empty()) << "a token for the live session";
  }  // the attacker hangs up

  proxy_->SetDroppingReplies(false);
  proxy_->Reset();
  auto previous = add.get();
  ASSERT_TRUE(previous.ok()) << previous.status();
  EXPECT_EQ(*previous, 2u);
  EXPECT_EQ(Counter(), 3u) << "the fetch-add ran twice";
  count_ = 3;
  Count(2);
  EXPECT_EQ(Counter(), 5u);
  EXPECT_EQ(target_->link_stats().resumed, 1u);
}

INSTANTIATE_TEST_SUITE_P(Secret, StreamResumeTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "WithSecret" : "NoSecret";
                         });

// A connector made by hand: one session of its own at `address`, opened and
// resumed with the proofs the real connector makes.
class RawSession {
 public:
  RawSession(std::string address, uint64_t session)
      : address_(std::move(address)), session_(session) {}

  // The session's first connection.
  UniqueFd Open() {
    proto::StreamOffer fresh;
    fresh.set_session(session_);
    auto [fd, reply] =
        SayHello(address_, me_,
                 HelloWith(me_, [&](const proto::Hello&) { return fresh; }));
    proto::StreamAnswer answer;
    EXPECT_TRUE(answer.ParseFromString(TcpAnswer(reply).answer()));
    token_ = answer.resume_token();
    EXPECT_EQ(token_.size(), internal::kResumeTokenBytes);
    return std::move(fd);
  }
  // A resume with `attempt` (and its right proof): the connection and the
  // tcp answer.
  std::pair<UniqueFd, proto::TransportAnswer> Resume(uint64_t attempt) {
    auto [fd, reply] = SayHello(
        address_, me_, HelloWith(me_, [&](const proto::Hello& h) {
          return xfer::Resume(
              session_, attempt,
              internal::ResumeProof(token_, session_, attempt, h.auth_nonce()));
        }));
    return {std::move(fd), TcpAnswer(reply)};
  }
  // A resume with the attempt after the last, which must be taken.
  UniqueFd ResumeNext() {
    auto [fd, answer] = Resume(++attempt_);
    EXPECT_TRUE(Resumed(answer)) << answer.declined();
    return std::move(fd);
  }
  static bool Resumed(const proto::TransportAnswer& answer) {
    proto::StreamAnswer a;
    return a.ParseFromString(answer.answer()) && a.resumed();
  }

 private:
  const std::string address_;
  const uint64_t session_;
  const HelloIdentity me_{"raw", 0x7a77, "raw-host", {}};
  std::string token_;
  uint64_t attempt_ = 0;
};

// A listener takes a resume attempt only above the last it took, and at
// most ResumeWindow above it; the one it takes ends the connection in use.
TEST(HandMadeSessionTest, AttemptsAreTakenJustAboveTheLast) {
  auto target = Context::Create(Options("target", {})).value();
  RawSession raw(target->address(), 0x5e5501);
  raw.Open().Reset();
  const uint64_t window =
      internal::ResumeWindow(std::chrono::milliseconds(kTimeoutMs));
  auto [far, far_answer] = raw.Resume(window + 1);
  EXPECT_NE(far_answer.declined().find("above the last taken"),
            std::string::npos)
      << "declined: \"" << far_answer.declined() << "\"";
  EXPECT_TRUE(ClosedWithoutAWord(far.get()));

  auto [live, live_answer] = raw.Resume(window);
  EXPECT_TRUE(RawSession::Resumed(live_answer)) << live_answer.declined();
  auto [again, again_answer] = raw.Resume(window);
  EXPECT_NE(again_answer.declined().find("stale"), std::string::npos)
      << "declined: \"" << again_answer.declined() << "\"";
  EXPECT_TRUE(ClosedWithoutAWord(again.get()));

  auto [next, next_answer] = raw.Resume(window + 1);
  EXPECT_TRUE(RawSession::Resumed(next_answer)) << next_answer.declined();
  EXPECT_TRUE(ClosedWithoutAWord(live.get())) << "two connections serve it";
  EXPECT_EQ(target->link_stats().resumed, 2u);
}

// A hand-made connector repeats request 1 (an 8-byte put the target
// executed) on resumed connections as requests no fresh one could be: a
// writev whose segment lengths wrap around to 8 bytes, and a put of 2^63
// bytes. Each connection is closed before a byte is skipped or written,
// with a log line; the real repeat is still answered from the record, and
// the target serves others. Before: the wrapped writev skipped 8 bytes and
// was answered (the rest of its "segment" would have been parsed as
// requests), and the put waited to skip 2^63 bytes.
TEST(HandMadeSessionTest, RepeatsHaveTheLimitsOfFreshRequests) {
  LogLines log;
  auto target = Context::Create(Options("target", {})).value();
  auto region = target->Allocate(4096, kRemoteAll).value();
  proto::RegionDescriptor d;
  ASSERT_TRUE(d.ParseFromString(region->descriptor()));
  auto header = [&](wire::WireOp op, uint64_t length) {
    wire::RequestHeader h{};
    h.magic = wire::kRequestMagic;
    h.op = static_cast<uint16_t>(op);
    h.request_id = 1;
    h.region_id = d.region_id();
    h.key = d.key();
    h.instance = d.instance();
    h.length = length;
    return h;
  };
  auto send = [](int fd, const void* data, size_t n) {
    ASSERT_TRUE(
        net::SendAllBefore(fd, data, n, DeadlineIn(2000), "request").ok());
  };
  auto expect_reply = [](int fd) {
    wire::ReplyHeader r{};
    ASSERT_TRUE(
        net::RecvAllBefore(fd, &r, sizeof(r), DeadlineIn(2000), "reply").ok());
    EXPECT_EQ(r.request_id, 1u);
    EXPECT_EQ(r.status_code, 0u);
  };

  RawSession raw(target->address(), 0x5e5510);
  UniqueFd fd = raw.Open();
  const wire::RequestHeader put = header(wire::WireOp::kPut, 8);
  send(fd.get(), &put, sizeof(put));
  send(fd.get(), "original", 8);
  expect_reply(fd.get());
  fd.Reset();  // the connection breaks; the session waits

  fd = raw.ResumeNext();
  const wire::RequestHeader writev = header(wire::WireOp::kWriteV, 2);
  const wire::SegmentEntry wrapping[2] = {{0, ~uint64_t{0} - 7}, {8, 16}};
  send(fd.get(), &writev, sizeof(writev));
  send(fd.get(), wrapping, sizeof(wrapping));
  send(fd.get(), "WRAPPED!", 8);
  EXPECT_TRUE(ClosedWithoutAWord(fd.get())) << "the wrapped writev went on";

  fd = raw.ResumeNext();
  const wire::RequestHeader huge =
      header(wire::WireOp::kPut, uint64_t{1} << 63);
  send(fd.get(), &huge, sizeof(huge));
  send(fd.get(), "HUGE-PUT", 8);
  EXPECT_TRUE(ClosedWithoutAWord(fd.get())) << "the 2^63-byte put went on";

  // The real repeat: answered, not written again.
  fd = raw.ResumeNext();
  send(fd.get(), &put, sizeof(put));
  send(fd.get(), "REPEATED", 8);
  expect_reply(fd.get());
  const char* bytes = static_cast<const char*>(region->data());
  EXPECT_EQ(std::string(bytes, 8), "original");
  EXPECT_EQ(std::string(bytes + 8, 24), std::string(24, '\0'));

  EXPECT_TRUE(log.Has("closing stream connection from raw after writev",
                      "repeated writev: segments add up to more than"))
      << "no log line for the wrapped writev";
  EXPECT_TRUE(log.Has("after put request 1",
                      "repeated put of 9223372036854775808 bytes"))
      << "no log line for the 2^63-byte put";

  // The target serves others as before.
  auto other = Context::Create(Options("other", {})).value();
  auto ep = other->Connect(target->address()).value();
  auto remote = ep->Import(region->descriptor()).value();
  auto previous = ep->FetchAdd64(remote, 64, 1);
  ASSERT_TRUE(previous.ok()) << previous.status();
  EXPECT_EQ(*previous, 0u);
}

}  // namespace
}  // namespace ps::xfer
