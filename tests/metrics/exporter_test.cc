// metrics::Exporter in this process, over real sockets on 127.0.0.1: the
// loop's own duties. A keep-alive connection serves request after request;
// a head dripped a byte at a time is closed at the request deadline; at the
// connection cap a new connection closes the one that waited longest (also
// one that does not read its answer) and is answered; out of descriptors the
// listener pauses instead of spinning and an idle connection is closed to make
// room; destroying the exporter is prompt whatever its peers do; bad options
// are clear errors.
#include "metrics/exporter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/sanitizers.h"
#include "net/connect.h"

namespace ps::metrics {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// Sanitizers slow the loop down; deadlines stay, waits stretch.
int Slowdown() {
#if defined(PS_ASAN) || defined(PS_TSAN)
  return 6;
#else
  return 1;
#endif
}

struct Served {
  Registry registry;
  std::unique_ptr<Exporter> exporter;
};

std::unique_ptr<Served> Serve(ExporterOptions options) {
  auto s = std::make_unique<Served>();
  auto up = s->registry.AddGauge("up", "Whether it is up.");
  EXPECT_TRUE(up.ok());
  (*up)->Set(1);
  auto e = Exporter::Start(&s->registry, options);
  EXPECT_TRUE(e.ok()) << e.status();
  if (e.ok()) s->exporter = std::move(*e);
  return s;
}

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

net::UniqueFd Connect(int port) {
  auto fd = net::ConnectTcp("127.0.0.1:" + std::to_string(port), 2000);
  EXPECT_TRUE(fd.ok()) << fd.status();
  return fd.ok() ? std::move(*fd) : net::UniqueFd();
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// Reads until `text` holds `count` answers' worth of "up 1\n" bodies or
// status lines (`marker`), the peer closes, or `timeout_ms` passes.
std::string ReadUntil(int fd, const std::string& marker, size_t count,
                      int timeout_ms, bool* eof) {
  std::string got;
  *eof = false;
  const Clock::time_point start = Clock::now();
  auto seen = [&] {
    size_t n = 0;
    for (size_t at = 0; (at = got.find(marker, at)) != std::string::npos;
         ++at) {
      ++n;
    }
    return n;
  };
  while (seen() < count && MillisSince(start) < timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      *eof = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Whether the server closed `fd` within `timeout_ms` (EOF or a reset).
bool ClosedWithin(int fd, int timeout_ms) {
  bool eof = false;
  ReadUntil(fd, "\x01never", 1, timeout_ms, &eof);
  return eof;
}

TEST(Exporter, KeepAliveServesRequestAfterRequest) {
  auto s = Serve({});
  ASSERT_NE(s->exporter, nullptr);
  net::UniqueFd c = Connect(s->exporter->port());
  bool eof = false;
  for (int i = 0; i < 3; ++i) {
    Send(c.get(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string got = ReadUntil(c.get(), "up 1\n", 1, 5000, &eof);
    ASSERT_NE(got.find("up 1\n"), std::string::npos) << i << ": " << got;
    ASSERT_FALSE(eof);
  }
  // Two pipelined in one segment, the second closing.
  Send(c.get(),
       "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n"
       "Connection: close\r\n\r\n");
  const std::string got = ReadUntil(c.get(), "up 1\n", 2, 5000, &eof);
  EXPECT_NE(got.find("up 1\n"), got.rfind("up 1\n")) << got;
  EXPECT_TRUE(ClosedWithin(c.get(), 2000 * Slowdown()));
}

TEST(Exporter, DrippedHeadIsClosedAtTheRequestDeadline) {
  ExporterOptions o;
  o.request_deadline = milliseconds(300);
  auto s = Serve(o);
  ASSERT_NE(s->exporter, nullptr);
  net::UniqueFd c = Connect(s->exporter->port());
  const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: ";
  const Clock::time_point start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < 100 && !closed; ++i) {
    const char byte = i < head.size() ? head[i] : 'a';
    // A byte every 30 ms: a per-read timeout would never fire.
    closed =
        send(c.get(), &byte, 1, MSG_NOSIGNAL) != 1 || ClosedWithin(c.get(), 30);
  }
  const int64_t took = MillisSince(start);
  EXPECT_TRUE(closed);
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 300 + 700 * Slowdown());
}

TEST(Exporter, CapClosesTheConnectionWaitingLongest) {
  ExporterOptions o;
  o.max_connections = 4;
  // Idle connections live long enough here: only the cap closes them.
  o.request_deadline = std::chrono::seconds(60);
  auto s = Serve(o);
  ASSERT_NE(s->exporter, nullptr);
  std::vector<net::UniqueFd> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(Connect(s->exporter->port()));
    // Accepted in this order (waiting_since tells them apart).
    std::this_thread::sleep_for(milliseconds(20));
  }
  net::UniqueFd c = Connect(s->exporter->port());
  Send(c.get(), "GET /metrics HTTP/1.1\r\n\r\n");
  bool eof = false;
  const std::string got = ReadUntil(c.get(), "up 1\n", 1, 5000, &eof);
  EXPECT_NE(got.find("up 1\n"), std::string::npos) << got;
  // The first idle one made room; the others stay.
  EXPECT_TRUE(ClosedWithin(idle[0].get(), 1000 * Slowdown()));
  for (int i = 1; i < 4; ++i) {
    EXPECT_FALSE(ClosedWithin(idle[i].get(), 50)) << i;
  }
}

// Peers that ask and then never read their answer hold their slots only
// until someone needs one: at the cap a scraper still gets in, by closing
// the one that has held its answer longest.
TEST(Exporter, PeersThatDoNotReadGiveUpTheirSlots) {
  ExporterOptions o;
  o.max_connections = 2;
  o.response_deadline = std::chrono::seconds(60);
  auto s = Serve(o);
  ASSERT_NE(s->exporter, nullptr);
  // An answer of about 1 MB: more than the socket buffers of a peer that
  // does not read (with a small receive window) hold, so its connection
  // stays in the middle of it.
  const std::string help(200, 'h');
  for (int i = 0; i < 5000; ++i) {
    std::string name = "g";  // (GCC 12 warns wrongly about "g" + string)
    name += std::to_string(i);
    ASSERT_TRUE(s->registry.AddGauge(name, help).ok());
  }
  std::vector<net::UniqueFd> stalled;
  for (int i = 0; i < 2; ++i) {
    // A small receive buffer, set before connecting (it sets the window).
    net::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int small = 4096;
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    const sockaddr_in a = Loopback(s->exporter->port());
    ASSERT_EQ(
        connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
    stalled.push_back(std::move(fd));
    Send(stalled.back().get(), "GET /metrics HTTP/1.1\r\n\r\n");
    std::this_thread::sleep_for(milliseconds(200));
  }
  net::UniqueFd scraper = Connect(s->exporter->port());
  const Clock::time_point start = Clock::now();
  Send(scraper.get(), "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  bool eof = false;
  const std::string got =
      ReadUntil(scraper.get(), "\x01never", 1, 10000 * Slowdown(), &eof);
  EXPECT_TRUE(eof);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK", 0), 0u) << got.substr(0, 200);
  EXPECT_NE(got.find("up 1\n"), std::string::npos);
  EXPECT_LT(MillisSince(start), 10000 * Slowdown());
  // The first stalled peer gave up its slot; the second keeps it.
  EXPECT_TRUE(ClosedWithin(stalled[0].get(), 2000 * Slowdown()));
}

// The process's soft descriptor limit set so that no descriptor can be
// opened (every number below the lowest free one is taken); restored when
// destroyed. `any_fd`: an open descriptor to find the lowest free one with.
class NoMoreDescriptors {
 public:
  explicit NoMoreDescriptors(int any_fd) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    const int lowest_free = fcntl(any_fd, F_DUPFD_CLOEXEC, 0);
    if (lowest_free < 0) return;
    close(lowest_free);
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(lowest_free);
    ok_ = setrlimit(RLIMIT_NOFILE, &low) == 0;
  }
  ~NoMoreDescriptors() { setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

TEST(Exporter, OutOfDescriptorsPausesThenClosesAnIdleConnection) {
  ExporterOptions o;
  // The idle connection below lives until it is closed to free a
  // descriptor, not until its request deadline.
  o.request_deadline = std::chrono::seconds(60);
  auto s = Serve(o);
  ASSERT_NE(s->exporter, nullptr);
  const int port = s->exporter->port();
  // The scraper's socket exists before the limit bites; connecting it
  // needs no new descriptor here, accepting it one in the exporter.
  net::UniqueFd scraper(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  net::UniqueFd second(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(scraper.valid() && second.valid());
  const sockaddr_in a = Loopback(port);
  const auto* sa = reinterpret_cast<const sockaddr*>(&a);
  {
    NoMoreDescriptors limit(scraper.get());
    ASSERT_TRUE(limit.ok());
    ASSERT_EQ(connect(scraper.get(), sa, sizeof(a)), 0);
    Send(scraper.get(), "GET /metrics HTTP/1.1\r\n\r\n");
    // No idle connection to close: the listener pauses between tries
    // (kOutOfDescriptorsPause) instead of spinning on a core.
    const double cpu = ProcessCpuSeconds();
    std::this_thread::sleep_for(milliseconds(500));
    EXPECT_LT(ProcessCpuSeconds() - cpu, 0.2);
  }
  // With descriptors again, the scrape waiting in the backlog is answered.
  bool eof = false;
  std::string got = ReadUntil(scraper.get(), "up 1\n", 1, 3000, &eof);
  EXPECT_NE(got.find("up 1\n"), std::string::npos) << got;
  // Out of descriptors again with that connection idle: it is closed to
  // free one, and the next connection is answered in its place.
  {
    NoMoreDescriptors limit(scraper.get());
    ASSERT_TRUE(limit.ok());
    ASSERT_EQ(connect(second.get(), sa, sizeof(a)), 0);
    Send(second.get(), "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
    got = ReadUntil(second.get(), "up 1\n", 1, 3000, &eof);
    EXPECT_NE(got.find("up 1\n"), std::string::npos) << got;
    EXPECT_TRUE(ClosedWithin(scraper.get(), 1000));
  }
}

TEST(Exporter, DestroyIsPromptWhateverPeersDo) {
  auto s = Serve({});
  ASSERT_NE(s->exporter, nullptr);
  std::vector<net::UniqueFd> peers;
  for (int i = 0; i < 10; ++i) peers.push_back(Connect(s->exporter->port()));
  Send(peers[0].get(), "GET /metr");
  Send(peers[1].get(), "GET /metrics HTTP/1.1\r\n\r\n");  // never read
  std::this_thread::sleep_for(milliseconds(50));
  const Clock::time_point start = Clock::now();
  s->exporter.reset();
  EXPECT_LT(MillisSince(start), 200 * Slowdown());
  // Every connection was closed with it.
  for (const net::UniqueFd& p : peers) {
    EXPECT_TRUE(ClosedWithin(p.get(), 1000));
  }
}

TEST(Exporter, BadOptionsAreClearErrors) {
  Registry r;
  ExporterOptions o;
  o.port = 70000;
  auto e = Exporter::Start(&r, o);
  EXPECT_TRUE(e.status().Is(StatusCode::kInvalidArgument)) << e.status();
  for (const char* host : {"", "$(POD_IP)", "no such host"}) {
    o = ExporterOptions();
    o.host = host;
    e = Exporter::Start(&r, o);
    EXPECT_TRUE(e.status().Is(StatusCode::kInvalidArgument))
        << host << ": " << e.status();
    EXPECT_TRUE(CheckHost(host).Is(StatusCode::kInvalidArgument)) << host;
  }
  o = ExporterOptions();
  o.max_connections = 0;
  EXPECT_TRUE(Exporter::Start(&r, o).status().Is(StatusCode::kInvalidArgument));
  // A port in use, named.
  auto first = Exporter::Start(&r, ExporterOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  o = ExporterOptions();
  o.port = (*first)->port();
  e = Exporter::Start(&r, o);
  EXPECT_TRUE(e.status().Is(StatusCode::kIOError)) << e.status();
  EXPECT_NE(e.status().message().find("cannot serve metrics on 127.0.0.1:" +
                                      std::to_string(o.port)),
            std::string::npos)
      << e.status();
  EXPECT_TRUE(CheckHost("127.0.0.1").ok());
  EXPECT_TRUE(CheckHost("::1").ok());
}

}  // namespace
}  // namespace ps::metrics
