// One exporter connection (metrics/http_connection.h) over a socketpair,
// with the clock passed in: what a peer can and cannot do to it. Dripping
// bytes never moves the request deadline; an answer the peer does not take
// keeps its deadline however little the peer reads; pipelined requests are
// answered in order and none is read while an answer is still being
// written; a bad request is answered, then the connection lingers,
// discarding input, until the peer closes; a half-closed peer still gets
// its answer; a kept-alive idle client is told apart from a trickling one.
#include "metrics/http_connection.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace ps::metrics {
namespace {

using Clock = HttpConnection::Clock;
using State = HttpConnection::State;
using std::chrono::milliseconds;

struct Pair {
  HttpConnection server;
  net::UniqueFd peer;
};

// A connection on one end of a socketpair whose send buffer is small, so
// that a large answer waits for the peer.
Pair MakePair(Clock::time_point now, const HttpConnection::Deadlines& d) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  const int small = 4096;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  return Pair{HttpConnection(net::UniqueFd(sv[0]), now, d),
              net::UniqueFd(sv[1])};
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// What the peer can read now (non-blocking).
std::string Drain(int fd, bool* eof = nullptr) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (eof != nullptr) *eof = n == 0;
    return out;
  }
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; ++at) {
    ++n;
  }
  return n;
}

HttpConnection::Responder Body(const std::string& body) {
  return [body](const ParsedHead& head) {
    return Respond(head, [&body] { return body; });
  };
}

TEST(HttpConnection, TrickleDoesNotMoveTheRequestDeadline) {
  const Clock::time_point t0 = Clock::now();
  HttpConnection::Deadlines d;
  d.request = milliseconds(2000);
  Pair p = MakePair(t0, d);
  const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: aaaa";
  for (size_t i = 0; i < head.size(); ++i) {
    Send(p.peer.get(), head.substr(i, 1));
    p.server.OnReadable(t0 + milliseconds(50 * i), Body("x"));
    ASSERT_EQ(p.server.state(), State::kAwaitingRequest);
    EXPECT_EQ(p.server.deadline(), t0 + milliseconds(2000));
    EXPECT_EQ(p.server.poll_events(), POLLIN);
  }
}

TEST(HttpConnection, AnswerNotTakenKeepsItsDeadline) {
  const Clock::time_point t0 = Clock::now();
  HttpConnection::Deadlines d;
  d.response = milliseconds(500);
  Pair p = MakePair(t0, d);
  const std::string big(4 << 20, 'x');
  Send(p.peer.get(),
       "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
  p.server.OnReadable(t0 + milliseconds(10), Body(big));
  ASSERT_EQ(p.server.state(), State::kResponding);
  EXPECT_EQ(p.server.poll_events(), POLLOUT);
  EXPECT_EQ(p.server.deadline(), t0 + milliseconds(510));
  // The peer reads a little now and then: the deadline stays.
  for (int i = 1; i <= 3; ++i) {
    char buf[1000];
    ASSERT_GT(recv(p.peer.get(), buf, sizeof(buf), 0), 0);
    p.server.OnEvents(POLLOUT, t0 + milliseconds(10 + 100 * i), Body(big));
    ASSERT_EQ(p.server.state(), State::kResponding);
    EXPECT_EQ(p.server.deadline(), t0 + milliseconds(510));
  }
}

TEST(HttpConnection, PipelinedRequestsAnsweredInOrder) {
  const Clock::time_point t0 = Clock::now();
  Pair p = MakePair(t0, {});
  const std::string body(100000, 'b');  // more than the socket takes at once
  Send(p.peer.get(),
       "GET /metrics HTTP/1.1\r\n\r\nGET /nothing HTTP/1.1\r\n\r\n"
       "HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  p.server.OnReadable(t0, Body(body));
  ASSERT_EQ(p.server.state(), State::kResponding);
  // As the exporter's loop drives it: the socket when it takes more, and
  // Continue for a request already read (one per round).
  std::string got;
  int continued = 0;
  for (int i = 0; i < 1000; ++i) {
    got += Drain(p.peer.get());
    if (p.server.state() == State::kResponding) {
      p.server.OnEvents(POLLOUT, t0 + milliseconds(i), Body(body));
    } else if (p.server.pending_input()) {
      p.server.Continue(t0 + milliseconds(i), Body(body));
      ++continued;
    } else {
      break;
    }
  }
  got += Drain(p.peer.get());
  EXPECT_GE(continued, 1);  // not all three in one call
  // All three, in order, and then our side shut.
  const size_t ok = got.find("HTTP/1.1 200 OK");
  const size_t missing = got.find("HTTP/1.1 404 Not Found");
  const size_t head = got.rfind("HTTP/1.1 200 OK");
  EXPECT_EQ(ok, 0u);
  EXPECT_GT(missing, ok);
  EXPECT_GT(head, missing);
  EXPECT_EQ(Count(got, "HTTP/1.1 "), 3u);
  EXPECT_EQ(got.substr(got.size() - 4), "\r\n\r\n");  // HEAD: no body
  EXPECT_EQ(p.server.state(), State::kLingering);
}

TEST(HttpConnection, BadRequestThenLingerUntilThePeerCloses) {
  const Clock::time_point t0 = Clock::now();
  HttpConnection::Deadlines d;
  d.linger = milliseconds(1000);
  Pair p = MakePair(t0, d);
  Send(p.peer.get(), "BROKEN\r\nmore garbage");
  p.server.OnReadable(t0, Body("x"));
  EXPECT_EQ(p.server.state(), State::kLingering);
  EXPECT_EQ(p.server.deadline(), t0 + milliseconds(1000));
  EXPECT_NE(p.server.TakeRejection().find("BROKEN"), std::string::npos);
  EXPECT_EQ(p.server.TakeRejection(), "");
  bool eof = false;
  const std::string got = Drain(p.peer.get(), &eof);
  EXPECT_EQ(got.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << got;
  EXPECT_TRUE(eof);  // our side is shut: the answer is all there is
  // What the peer still sends is discarded; its close ends the connection.
  Send(p.peer.get(), std::string(10000, 'g'));
  p.server.OnEvents(POLLIN, t0 + milliseconds(1), Body("x"));
  EXPECT_EQ(p.server.state(), State::kLingering);
  p.peer.Reset();
  p.server.OnEvents(POLLIN | POLLHUP, t0 + milliseconds(2), Body("x"));
  EXPECT_EQ(p.server.state(), State::kClosed);
  EXPECT_EQ(p.server.fd(), -1);
}

TEST(HttpConnection, HalfClosedPeerGetsItsAnswer) {
  const Clock::time_point t0 = Clock::now();
  Pair p = MakePair(t0, {});
  Send(p.peer.get(), "GET /metrics HTTP/1.1\r\n\r\n");
  shutdown(p.peer.get(), SHUT_WR);
  p.server.OnReadable(t0, Body("up 1\n"));
  bool eof = false;
  const std::string got = Drain(p.peer.get(), &eof);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_EQ(got.substr(got.size() - 5), "up 1\n");
  EXPECT_TRUE(eof);
  EXPECT_EQ(p.server.state(), State::kClosed);
}

// A scraper that keeps its connection between scrapes is told apart from
// one that trickles: the exporter closes both at the deadline, but logs
// only the second.
TEST(HttpConnection, KeptAliveIdleIsToldApart) {
  const Clock::time_point t0 = Clock::now();
  Pair p = MakePair(t0, {});
  EXPECT_FALSE(p.server.idle_after_answer());  // no answer yet
  Send(p.peer.get(), "GET /metrics HTTP/1.1\r\n\r\n");
  p.server.OnReadable(t0, Body("up 1\n"));
  ASSERT_EQ(p.server.state(), State::kAwaitingRequest);
  EXPECT_TRUE(p.server.idle_after_answer());
  EXPECT_EQ(p.server.deadline(), t0 + HttpConnection::Deadlines().request);
  Send(p.peer.get(), "G");
  p.server.OnReadable(t0 + milliseconds(5), Body("up 1\n"));
  EXPECT_FALSE(p.server.idle_after_answer());
}

TEST(HttpConnection, PeerGoneWhileAwaiting) {
  const Clock::time_point t0 = Clock::now();
  Pair p = MakePair(t0, {});
  Send(p.peer.get(), "GET /metr");
  p.peer.Reset();
  p.server.OnEvents(POLLIN | POLLHUP, t0, Body("x"));
  EXPECT_EQ(p.server.state(), State::kClosed);
  EXPECT_EQ(p.server.TakeRejection(), "");  // nobody to answer
}

}  // namespace
}  // namespace ps::metrics
