#include "net/handshake_gate.h"

#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "net/accept.h"
#include "net/connect.h"

namespace ps::net {
namespace {

using Clock = std::chrono::steady_clock;

// Connections taken from one listener before the gate looks at the others
// and at the handshakes in progress again: a flood of connects must not
// keep the thread in accept(2).
constexpr size_t kAcceptsPerRound = 64;

int MillisecondsUntil(Clock::time_point t, Clock::time_point now) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 60 * 1000));
}

}  // namespace

struct HandshakeGate::Pending {
  UniqueFd fd;
  std::string address;  // the peer's, for log lines
  Clock::time_point deadline;
  std::unique_ptr<Handshake> handshake;

  // "127.0.0.1:5000 (worker-3)": who, for a log line.
  std::string Who() const {
    const std::string name = handshake->claimed_name();
    return name.empty() ? address : address + " (claims to be " + name + ")";
  }
};

StatusOr<std::unique_ptr<HandshakeGate>> HandshakeGate::Start(
    Options options, std::vector<UniqueFd> listeners,
    NewHandshake new_handshake) {
  if (options.handshake_timeout_ms <= 0 || options.max_handshakes == 0) {
    return InvalidArgument(options.name +
                           ": the handshake deadline and the number of "
                           "handshakes at once must be positive");
  }
  std::unique_ptr<HandshakeGate> gate(new HandshakeGate(
      std::move(options), std::move(listeners), std::move(new_handshake)));
  gate->wake_ = UniqueFd(eventfd(0, EFD_CLOEXEC));
  if (!gate->wake_.valid()) {
    return ErrnoStatus(StatusCode::kIOError, "eventfd", errno);
  }
  for (const UniqueFd& l : gate->listeners_) {
    PS_RETURN_IF_ERROR(SetBlocking(l.get(), false));
  }
  gate->thread_ = std::thread([g = gate.get()] { g->Loop(); });
  return gate;
}

HandshakeGate::HandshakeGate(Options options, std::vector<UniqueFd> listeners,
                             NewHandshake new_handshake)
    : options_(std::move(options)),
      listeners_(std::move(listeners)),
      new_handshake_(std::move(new_handshake)) {}

HandshakeGate::~HandshakeGate() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));
    thread_.join();
  }
}

void HandshakeGate::Loop() {
  std::vector<pollfd> fds;
  Clock::time_point listeners_resume{};  // paused until then
  for (;;) {
    const Clock::time_point now = Clock::now();
    const bool listening = now >= listeners_resume;
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    // A paused listener stays in the array with fd -1, which poll ignores.
    for (const UniqueFd& l : listeners_) {
      fds.push_back({listening ? l.get() : -1, POLLIN, 0});
    }
    int timeout_ms = listening ? -1 : MillisecondsUntil(listeners_resume, now);
    for (const auto& p : pending_) {
      fds.push_back({p->fd.get(), POLLIN, 0});
      const int ms = MillisecondsUntil(p->deadline, now);
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    const int rc = poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) {
      // Out of kernel memory, or a bug: never spin on it.
      uint64_t held_back = 0;
      if (descriptors_log_.Allow(&held_back)) {
        LOG(ERROR) << options_.name << ": poll failed: " << std::strerror(errno)
                   << LogLimiter::HeldBack(held_back);
      }
      listeners_resume = Clock::now() + kOutOfDescriptorsPause;
      std::this_thread::sleep_for(kOutOfDescriptorsPause);
      continue;
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) return;
    // The handshakes first (their fds follow the listeners'), then the
    // listeners, whose new connections join the next poll.
    const size_t first_pending = 1 + listeners_.size();
    const Clock::time_point after = Clock::now();
    std::vector<std::unique_ptr<Pending>> still;
    still.reserve(pending_.size());
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = *pending_[i];
      bool go_on = true;
      if (rc > 0 && fds[first_pending + i].revents != 0) go_on = Advance(p);
      if (go_on && after >= p.deadline) {
        uint64_t held_back = 0;
        if (refused_log_.Allow(&held_back)) {
          LOG(WARNING) << options_.name << ": closed the connection from "
                       << p.Who() << ": no complete handshake within "
                       << options_.handshake_timeout_ms << " ms"
                       << LogLimiter::HeldBack(held_back);
        }
        go_on = false;
      }
      if (go_on) still.push_back(std::move(pending_[i]));
    }
    pending_ = std::move(still);
    for (size_t i = 0; rc > 0 && i < listeners_.size(); ++i) {
      if ((fds[1 + i].revents & POLLIN) && !AcceptAll(i)) {
        listeners_resume = Clock::now() + kOutOfDescriptorsPause;
        break;
      }
    }
  }
}

bool HandshakeGate::AcceptAll(size_t listener) {
  for (size_t n = 0; n < kAcceptsPerRound; ++n) {
    Accepted a = AcceptNonBlocking(listeners_[listener].get());
    if (a.result == AcceptResult::kNoneWaiting) return true;
    if (a.result != AcceptResult::kAccepted) {
      uint64_t held_back = 0;
      if (descriptors_log_.Allow(&held_back)) {
        LOG(WARNING) << options_.name << ": "
                     << (a.result == AcceptResult::kOutOfDescriptors
                             ? OutOfDescriptorsText(a.error)
                             : std::string("accept failed: ") +
                                   std::strerror(a.error))
                     << "; new connections wait in the backlog for "
                     << kOutOfDescriptorsPause.count() << " ms"
                     << LogLimiter::HeldBack(held_back);
      }
      if (a.result == AcceptResult::kOutOfDescriptors && !pending_.empty()) {
        DropOne("to free a file descriptor");
      }
      return false;
    }
    if (pending_.size() >= options_.max_handshakes) DropOne("to make room");
    const int one = 1;  // fails harmlessly on a Unix socket
    setsockopt(a.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto p = std::make_unique<Pending>();
    p->address = PeerAddress(a.fd.get());
    p->deadline =
        Clock::now() + std::chrono::milliseconds(options_.handshake_timeout_ms);
    p->handshake = new_handshake_(listener, a.fd.get(), p->address);
    p->fd = std::move(a.fd);
    // Read at once: a peer whose first message came with its connection
    // (as a member's does) is ahead of every silent newcomer from here on,
    // so the next connection cannot make room by dropping it.
    if (Advance(*p)) pending_.push_back(std::move(p));
  }
  return true;
}

bool HandshakeGate::Advance(Pending& p) {
  StatusOr<Handshake::Next> next = p.handshake->OnReadable(p.fd.get());
  if (!next.ok()) {
    uint64_t held_back = 0;
    if (refused_log_.Allow(&held_back)) {
      LOG(WARNING) << options_.name << ": refused the connection from "
                   << p.Who() << ": " << next.status()
                   << LogLimiter::HeldBack(held_back);
    }
    return false;
  }
  switch (*next) {
    case Handshake::Next::kMore:
      return true;
    case Handshake::Next::kClose:
      return false;
    case Handshake::Next::kDone:
      (void)SetBlocking(p.fd.get(), true);  // fails only for a bad fd
      p.handshake->Adopt(std::move(p.fd));
      return false;
  }
  return false;
}

void HandshakeGate::DropOne(const char* why) {
  auto least = pending_.begin();
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if ((*it)->handshake->progress() < (*least)->handshake->progress()) {
      least = it;
    }
  }
  uint64_t held_back = 0;
  if (dropped_log_.Allow(&held_back)) {
    LOG(WARNING) << options_.name << ": dropped the handshake of "
                 << (*least)->Who() << ", " << pending_.size()
                 << " in progress (the limit), " << why
                 << LogLimiter::HeldBack(held_back);
  }
  pending_.erase(least);
}

}  // namespace ps::net
