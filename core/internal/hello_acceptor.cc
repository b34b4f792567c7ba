#include "core/internal/hello_acceptor.h"

#include <fcntl.h>
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

#include "core/internal/hello.h"
#include "net/connect.h"

namespace ps::xfer::internal {
namespace {

using net::Deadline;
using net::DeadlineIn;
using net::PeerAddress;
using net::UniqueFd;

using Clock = std::chrono::steady_clock;

// A reply to a fresh connection fits its empty socket buffer; a peer that
// does not take it within this long is not worth waiting for.
constexpr int kReplySendMs = 200;

void SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

}  // namespace

struct HelloAcceptor::Pending {
  enum class Stage { kHello, kProof };
  net::UniqueFd fd;
  bool same_host = false;
  std::string address;  // the peer's, for log lines
  net::Deadline deadline;
  Stage stage = Stage::kHello;
  FrameReader reader;
  proto::Hello hello;
  std::string nonce;  // ours, sent in the challenge
};

StatusOr<std::unique_ptr<HelloAcceptor>> HelloAcceptor::Start(
    Options options, std::vector<Listener> listeners, OnHello on_hello) {
  std::unique_ptr<HelloAcceptor> a(new HelloAcceptor(
      std::move(options), std::move(listeners), std::move(on_hello)));
  a->wake_ = net::UniqueFd(eventfd(0, EFD_CLOEXEC));
  if (!a->wake_.valid()) {
    return ErrnoStatus(StatusCode::kIOError, "eventfd", errno);
  }
  for (const Listener& l : a->listeners_) SetNonBlocking(l.fd.get(), true);
  a->thread_ = std::thread([p = a.get()] { p->Loop(); });
  return a;
}

HelloAcceptor::HelloAcceptor(Options options, std::vector<Listener> listeners,
                             OnHello on_hello)
    : options_(std::move(options)),
      listeners_(std::move(listeners)),
      on_hello_(std::move(on_hello)) {}

HelloAcceptor::~HelloAcceptor() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));
    thread_.join();
  }
}

void HelloAcceptor::Loop() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    for (const Listener& l : listeners_) fds.push_back({l.fd.get(), POLLIN, 0});
    int timeout_ms = -1;
    const auto now = Clock::now();
    for (const auto& p : pending_) {
      fds.push_back({p->fd.get(), POLLIN, 0});
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(p->deadline - now)
              .count();
      const int ms = static_cast<int>(std::max<int64_t>(0, left));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    int rc = poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) {
      LOG(ERROR) << options_.name << ": poll on the listeners failed: "
                 << ErrnoStatus(StatusCode::kNetwork, "poll", errno)
                 << "; no more connections are accepted";
      return;
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) return;
    // Pending hellos first (their fds follow the listeners'), then the
    // listeners, whose new connections join the next poll.
    const size_t first_pending = 1 + listeners_.size();
    std::vector<std::unique_ptr<Pending>> still;
    still.reserve(pending_.size());
    const auto after = Clock::now();
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = *pending_[i];
      bool go_on = true;
      if (rc > 0 && fds[first_pending + i].revents != 0) go_on = Advance(p);
      if (go_on && after >= p.deadline) {
        go_on =
            Refuse(p,
                   Timeout("no complete hello within " +
                           std::to_string(options_.hello_timeout_ms) + " ms"),
                   /*tell_peer=*/false);
      }
      if (go_on) still.push_back(std::move(pending_[i]));
    }
    pending_ = std::move(still);
    for (size_t i = 0; rc > 0 && i < listeners_.size(); ++i) {
      if (fds[1 + i].revents & POLLIN) AcceptAll(listeners_[i]);
    }
  }
}

void HelloAcceptor::AcceptAll(const Listener& listener) {
  for (;;) {
    int fd = accept4(listener.fd.get(), nullptr, nullptr,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        LOG_EVERY_N(WARNING, 100)
            << options_.name << ": accept failed: "
            << ErrnoStatus(StatusCode::kNetwork, "accept", errno);
      }
      return;
    }
    if (!listener.same_host) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    auto p = std::make_unique<Pending>();
    p->fd = net::UniqueFd(fd);
    p->same_host = listener.same_host;
    p->address = net::PeerAddress(fd);
    if (pending_.size() >= options_.max_pending) {
      LOG_EVERY_N(WARNING, 100)
          << options_.name << ": closed a connection from " << p->address
          << ": " << pending_.size()
          << " hellos are pending already (the limit)";
      continue;
    }
    p->deadline = net::DeadlineIn(options_.hello_timeout_ms);
    pending_.push_back(std::move(p));
  }
}

bool HelloAcceptor::Refuse(Pending& p, const Status& why, bool tell_peer) {
  LOG_EVERY_N(WARNING, 20) << options_.name << ": refused the connection from "
                           << p.address
                           << (p.hello.name().empty()
                                   ? std::string()
                                   : " (" + p.hello.name() + ")")
                           << ": " << why;
  if (tell_peer) {
    proto::HelloReply reply;
    reply.set_name(options_.name);
    reply.set_error(why.message());
    reply.set_error_code(static_cast<uint32_t>(why.code()));
    (void)SendMessage(p.fd.get(), reply, net::DeadlineIn(kReplySendMs));
  }
  return false;
}

bool HelloAcceptor::Advance(Pending& p) {
  for (;;) {
    bool complete = false;
    Status s = p.reader.Read(p.fd.get(), &complete);
    if (!s.ok()) {
      // A peer that hung up before its hello (a port probe) is not news; one
      // that hangs up when challenged did not know the secret.
      if (s.Is(StatusCode::kPeerLost)) {
        if (p.stage == Pending::Stage::kHello) return false;
        return Refuse(
            p,
            Unauthenticated("it hung up instead of proving the cluster secret"),
            /*tell_peer=*/false);
      }
      return Refuse(p, s, /*tell_peer=*/false);
    }
    if (!complete) return true;
    if (p.stage == Pending::Stage::kHello) {
      s = p.reader.Parse(&p.hello);
      if (!s.ok()) return Refuse(p, s, false);
      if (options_.secret.empty()) {
        Finish(p);
        return false;
      }
      if (p.hello.auth_nonce().size() != kNonceBytes) {
        return Refuse(
            p,
            Unauthenticated(
                "it did not offer to authenticate; this cluster needs "
                "the cluster secret (--cluster_secret_file or "
                "$PS_CLUSTER_SECRET_FILE)"),
            /*tell_peer=*/true);
      }
      p.nonce = NewNonce();
      proto::HelloReply challenge;
      challenge.set_name(options_.name);
      challenge.set_auth_nonce(p.nonce);
      challenge.set_auth_proof(
          options_.secret.Prove(kXferAuthProtocol, AuthRole::kAcceptor, p.nonce,
                                p.hello.auth_nonce()));
      s = SendMessage(p.fd.get(), challenge, net::DeadlineIn(kReplySendMs));
      if (!s.ok()) return Refuse(p, s.WithContext("challenge"), false);
      p.stage = Pending::Stage::kProof;
      continue;  // the proof may be here already
    }
    proto::AuthProof proof;
    s = p.reader.Parse(&proof);
    if (!s.ok()) return Refuse(p, s, false);
    if (!options_.secret.Verify(kXferAuthProtocol, AuthRole::kConnector,
                                p.nonce, p.hello.auth_nonce(), proof.proof())) {
      return Refuse(
          p,
          Unauthenticated("authentication failed (a different cluster secret)"),
          /*tell_peer=*/true);
    }
    Finish(p);
    return false;
  }
}

void HelloAcceptor::Finish(Pending& p) {
  Answer answer = on_hello_(p.hello, p.same_host);
  Status s =
      SendMessage(p.fd.get(), answer.reply, net::DeadlineIn(kReplySendMs));
  if (!s.ok()) {
    LOG(WARNING) << options_.name << ": hello reply to " << p.hello.name()
                 << " (" << p.address << ") failed: " << s;
    return;
  }
  if (!answer.reply.error().empty() || !answer.adopt) return;
  SetNonBlocking(p.fd.get(), false);
  answer.adopt(std::move(p.fd));
}

}  // namespace ps::xfer::internal
