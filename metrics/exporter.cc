#include "metrics/exporter.h"

#include <glog/logging.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "base/log_limiter.h"
#include "base/printable.h"
#include "metrics/http_connection.h"
#include "metrics/http_response.h"
#include "metrics/text_format.h"
#include "net/accept.h"
#include "net/connect.h"
#include "net/unique_fd.h"

namespace ps::metrics {
namespace {

using Clock = std::chrono::steady_clock;
using State = HttpConnection::State;

constexpr auto kLogPeriod = std::chrono::seconds(10);
// Accepts per poll round: the connections already open get their turn
// between rounds however fast new ones arrive.
constexpr int kAcceptsPerRound = 16;

// Milliseconds from `now` until `t`, rounded up (a deadline is never
// polled for a moment too early, which would spin), at least 0.
int MillisUntil(Clock::time_point now, Clock::time_point t) {
  if (t <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - now);
  return static_cast<int>(std::min<int64_t>(ms.count(), 3600 * 1000));
}

std::string Millis(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

}  // namespace

struct Exporter::Impl {
  const Registry* registry = nullptr;
  ExporterOptions options;
  HttpConnection::Deadlines deadlines;
  net::UniqueFd listener;
  net::UniqueFd wake;  // an eventfd: readable when the exporter stops
  std::vector<HttpConnection> connections;
  Clock::time_point listener_paused_until;
  // One line per period for each kind of trouble a peer makes.
  LogLimiter evicted_log{kLogPeriod};
  LogLimiter deadline_log{kLogPeriod};
  LogLimiter rejected_log{kLogPeriod};
  LogLimiter accept_log{kLogPeriod};
  std::thread thread;

  void Run();
  HttpResponse Answer(const ParsedHead& head) const;
  void Accept(Clock::time_point now, const HttpConnection::Responder& respond);
  void EnforceDeadlines(Clock::time_point now);
  // The connection to close for room: lingering ones (done, waiting for
  // the peer to close) first, then those waiting for a request, then those
  // being answered (a peer that does not read its answer holds one); the
  // one that waited longest of those. None only when nothing is open.
  std::optional<size_t> Victim() const;
  void Reap();
  void LogPeer(LogLimiter& limiter, const HttpConnection& c,
               const std::string& what);
  void LogRejection(HttpConnection& c);
};

HttpResponse Exporter::Impl::Answer(const ParsedHead& head) const {
  return Respond(head, [this] { return RenderText(registry->Snapshot()); });
}

void Exporter::Impl::Run() {
  const HttpConnection::Responder respond = [this](const ParsedHead& head) {
    return Answer(head);
  };
  std::vector<pollfd> fds;
  for (;;) {
    Clock::time_point now = Clock::now();
    const bool listening = now >= listener_paused_until;
    fds.clear();
    fds.push_back({wake.get(), POLLIN, 0});
    // A negative fd is skipped by poll: the listener while paused.
    fds.push_back({listening ? listener.get() : -1, POLLIN, 0});
    bool timed = !listening;
    Clock::time_point next = listener_paused_until;
    bool pending = false;  // a request already read waits for its answer
    for (const HttpConnection& c : connections) {
      fds.push_back({c.fd(), c.poll_events(), 0});
      next = timed ? std::min(next, c.deadline()) : c.deadline();
      timed = true;
      pending = pending || c.pending_input();
    }
    const int timeout = pending ? 0 : timed ? MillisUntil(now, next) : -1;
    if (poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      uint64_t held = 0;
      if (accept_log.Allow(&held)) {
        LOG(ERROR) << "metrics: poll: " << std::strerror(err)
                   << LogLimiter::HeldBack(held);
      }
      std::this_thread::sleep_for(net::kOutOfDescriptorsPause);
      continue;
    }
    if (fds[0].revents != 0) return;  // stopping: before any other work
    now = Clock::now();
    for (size_t i = 0; i < connections.size(); ++i) {
      const short revents = fds[i + 2].revents;
      if (revents != 0) {
        connections[i].OnEvents(revents, now, respond);
      } else if (connections[i].pending_input()) {
        connections[i].Continue(now, respond);
      } else {
        continue;
      }
      LogRejection(connections[i]);
    }
    EnforceDeadlines(now);
    Reap();
    if (listening && (fds[1].revents & (POLLIN | POLLERR)) != 0) {
      Accept(now, respond);
    }
  }
}

void Exporter::Impl::Accept(Clock::time_point now,
                            const HttpConnection::Responder& respond) {
  for (int round = 0; round < kAcceptsPerRound; ++round) {
    net::Accepted a = net::AcceptNonBlocking(listener.get());
    if (a.result == net::AcceptResult::kNoneWaiting) return;
    if (a.result == net::AcceptResult::kOutOfDescriptors ||
        a.result == net::AcceptResult::kFailed) {
      // The connection stays in the backlog and the listener would poll
      // readable at once: stop polling it for a while, and free a
      // descriptor if one is merely waiting.
      listener_paused_until = now + net::kOutOfDescriptorsPause;
      std::optional<size_t> victim;
      if (a.result == net::AcceptResult::kOutOfDescriptors) victim = Victim();
      if (victim.has_value()) {
        connections[*victim].Close();
        Reap();
      }
      uint64_t held = 0;
      if (accept_log.Allow(&held)) {
        LOG(WARNING) << "metrics: "
                     << (a.result == net::AcceptResult::kFailed
                             ? std::string("accept: ") + std::strerror(a.error)
                             : net::OutOfDescriptorsText(a.error))
                     << "; not accepting for "
                     << Millis(net::kOutOfDescriptorsPause)
                     << (victim.has_value()
                             ? " (closed the connection waiting longest)"
                             : "")
                     << LogLimiter::HeldBack(held);
      }
      return;
    }
    if (connections.size() >= options.max_connections) {
      // Never queued: a newcomer always gets a slot (a scraper's request
      // is answered within a round), the connection that waited longest
      // gives it up.
      const std::optional<size_t> victim = Victim();
      if (!victim.has_value()) continue;  // no slots at all: a.fd closes
      LogPeer(evicted_log, connections[*victim],
              "to make room (" + std::to_string(options.max_connections) +
                  " connections open; this one waited longest)");
      connections[*victim].Close();
      Reap();
    }
    connections.emplace_back(std::move(a.fd), now, deadlines);
    // The request often came with the connection: answer it now, before a
    // later connection could make room by closing this one.
    connections.back().OnReadable(now, respond);
    LogRejection(connections.back());
    Reap();
  }
}

void Exporter::Impl::EnforceDeadlines(Clock::time_point now) {
  for (HttpConnection& c : connections) {
    if (c.state() == State::kClosed || now < c.deadline()) continue;
    if (c.idle_after_answer()) {
      // A kept-alive scraper between scrapes: it reconnects next time.
    } else if (c.state() == State::kAwaitingRequest) {
      LogPeer(deadline_log, c,
              "no whole request within " + Millis(options.request_deadline));
    } else if (c.state() == State::kResponding) {
      LogPeer(deadline_log, c,
              "did not take its answer within " +
                  Millis(options.response_deadline));
    }
    c.Close();
  }
}

std::optional<size_t> Exporter::Impl::Victim() const {
  // Rank: lingering (answered, waiting for the peer to close) before
  // awaiting a request before being answered; within a rank, the one that
  // waited longest (for an answer being written: the earliest deadline, the
  // oldest answer, which a reader that does not read holds).
  auto rank = [](const HttpConnection& c) {
    switch (c.state()) {
      case State::kLingering:
        return 0;
      case State::kAwaitingRequest:
        return 1;
      case State::kResponding:
        return 2;
      case State::kClosed:
        break;
    }
    return 3;
  };
  auto since = [](const HttpConnection& c) {
    return c.state() == State::kResponding ? c.deadline() : c.waiting_since();
  };
  std::optional<size_t> best;
  for (size_t i = 0; i < connections.size(); ++i) {
    const HttpConnection& c = connections[i];
    if (rank(c) == 3) continue;
    if (!best.has_value()) {
      best = i;
      continue;
    }
    const HttpConnection& b = connections[*best];
    if (rank(c) != rank(b) ? rank(c) < rank(b) : since(c) < since(b)) best = i;
  }
  return best;
}

void Exporter::Impl::Reap() {
  connections.erase(std::remove_if(connections.begin(), connections.end(),
                                   [](const HttpConnection& c) {
                                     return c.state() == State::kClosed;
                                   }),
                    connections.end());
}

void Exporter::Impl::LogPeer(LogLimiter& limiter, const HttpConnection& c,
                             const std::string& what) {
  uint64_t held = 0;
  if (limiter.Allow(&held)) {
    LOG(WARNING) << "metrics: closed " << c.peer() << ": " << what
                 << LogLimiter::HeldBack(held);
  }
}

void Exporter::Impl::LogRejection(HttpConnection& c) {
  const std::string why = c.TakeRejection();
  uint64_t held = 0;
  if (!why.empty() && rejected_log.Allow(&held)) {
    LOG(WARNING) << "metrics: bad request from " << c.peer() << ": "
                 << Printable(why, 200) << LogLimiter::HeldBack(held);
  }
}

Status CheckHost(const std::string& host) {
  if (host.empty()) {
    return InvalidArgument(
        "no metrics host: give the address to serve on (127.0.0.1: this "
        "host alone)");
  }
  // What no address or host name holds ("$(POD_IP)" left unexpanded, a
  // space) is refused without asking a resolver.
  const bool plausible = std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::strchr(".-_:[]%", c) != nullptr;
  });
  if (!plausible) {
    return InvalidArgument("metrics host '" + Printable(host) +
                           "' is no address: give one of this host's, e.g. "
                           "127.0.0.1");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), "0", &hints, &result);
  if (rc != 0) {
    return InvalidArgument("metrics host '" + Printable(host) +
                           "' is no address (" + gai_strerror(rc) +
                           "): give one of this host's, e.g. 127.0.0.1");
  }
  freeaddrinfo(result);
  return Status::OK();
}

StatusOr<std::unique_ptr<Exporter>> Exporter::Start(const Registry* registry,
                                                    const std::string& host,
                                                    int port) {
  ExporterOptions options;
  options.host = host;
  options.port = port;
  return Start(registry, options);
}

StatusOr<std::unique_ptr<Exporter>> Exporter::Start(
    const Registry* registry, const ExporterOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("metrics port must be in [0, 65535], not " +
                           std::to_string(options.port));
  }
  if (options.max_connections < 1 || options.request_deadline.count() <= 0 ||
      options.response_deadline.count() <= 0) {
    return InvalidArgument(
        "metrics exporter: max_connections and the deadlines must be "
        "positive");
  }
  PS_RETURN_IF_ERROR(CheckHost(options.host));
  const std::string where = options.host + ":" + std::to_string(options.port);
  auto impl = std::make_unique<Impl>();
  impl->registry = registry;
  impl->options = options;
  impl->deadlines.request = options.request_deadline;
  impl->deadlines.response = options.response_deadline;
  auto listener =
      net::ListenTcp(options.host, static_cast<uint16_t>(options.port));
  if (!listener.ok()) {
    return IOError("cannot serve metrics on " + where + ": " +
                   listener.status().message() +
                   " (port in use, not permitted, or not an address of "
                   "this host)");
  }
  impl->listener = std::move(*listener);
  // Non-blocking: a connection reset between poll and accept must not
  // stop the loop in accept(2).
  PS_RETURN_IF_ERROR(net::SetBlocking(impl->listener.get(), false));
  auto port = net::LocalPort(impl->listener.get());
  if (!port.ok()) return port.status();
  impl->wake = net::UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->wake.valid()) {
    return ErrnoStatus(StatusCode::kIOError, "metrics eventfd", errno);
  }
  std::unique_ptr<Exporter> e(new Exporter(std::move(impl)));
  e->host_ = options.host;
  e->port_ = *port;
  Impl* raw = e->impl_.get();
  raw->thread = std::thread([raw] { raw->Run(); });
  return e;
}

Exporter::Exporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Exporter::~Exporter() {
  if (impl_ == nullptr || !impl_->thread.joinable()) return;
  const uint64_t one = 1;
  // An eventfd write of 1 cannot fail short of a counter overflow.
  [[maybe_unused]] const ssize_t n =
      write(impl_->wake.get(), &one, sizeof(one));
  impl_->thread.join();
}

std::string Exporter::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" +
         std::to_string(port_) + "/metrics";
}

}  // namespace ps::metrics
