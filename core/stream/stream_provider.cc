#include "core/stream/stream_provider.h"

#include <glog/logging.h>

#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "base/log_limiter.h"
#include "base/printable.h"
#include "core/auth.h"
#include "core/internal/context_impl.h"
#include "core/stream/session_resume.h"
#include "core/stream/stream.pb.h"
#include "core/stream/stream_server.h"
#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {
namespace {

using Clock = std::chrono::steady_clock;

// The session a connector offered, kept from Offer to Connect.
struct SessionOffer : PendingOffer {
  uint64_t session = 0;
};

// What the reconnect closure of a connector's session keeps: the session,
// its resume token, and the attempts counted so far.
struct ResumeState {
  uint64_t session = 0;
  std::string token;
  uint64_t attempt = 0;
};

// The tcp offer of a resume `attempt` of `state`'s session, for `hello`:
// its proof covers the hello's auth_nonce.
proto::TransportOffer ResumeOffer(const ResumeState& state, uint32_t provider,
                                  const proto::Hello& hello) {
  proto::StreamOffer so;
  so.set_session(state.session);
  so.set_resume(true);
  so.set_attempt(state.attempt);
  so.set_resume_proof(ResumeProof(state.token, state.session, state.attempt,
                                  hello.auth_nonce()));
  proto::TransportOffer offer;
  offer.set_provider(provider);
  offer.set_name("tcp");
  offer.set_offer(so.SerializeAsString());
  return offer;
}

class StreamProvider : public TransportProvider {
 public:
  TransportKind kind() const override { return TransportKind::kTcp; }

  // The Context's TCP listener is the stream's: nothing to start.
  Status Start(const ProviderEnv& env) override {
    env_ = env;
    return Status::OK();
  }

  void Stop() override {
    std::vector<std::unique_ptr<StreamServer>> servers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      servers.swap(servers_);
      sessions_.clear();
    }
    servers.clear();  // each stops and joins its thread
  }

  // Every connection may become a tcp session: the offer names it.
  Status Offer(Dial& dial) override {
    if (!dial.selection.allowed) return Status::OK();
    auto pending = std::make_unique<SessionOffer>();
    pending->session = RandomNonZero();
    proto::StreamOffer offer;
    offer.set_session(pending->session);
    dial.offer.set_offer(offer.SerializeAsString());
    dial.pending = std::move(pending);
    return Status::OK();
  }

  StatusOr<std::unique_ptr<Transport>> Connect(Dial& dial) override;

  std::function<void(net::UniqueFd)> Answer(const Greeting& greeting) override;

 private:
  // On the listener's side, the hello's name is escaped (Printable) at the
  // door already (core/internal/hello_acceptor.cc): log lines take it as it
  // is.
  //
  // A resume offer: checked here (the session, the proof of its token, the
  // attempt), taken over by the function returned once the reply went out
  // (TakeOver). A resume refused anywhere leaves the session's connection
  // as it is.
  std::function<void(net::UniqueFd)> AnswerResume(
      const Greeting& greeting, const proto::StreamOffer& offer);
  // Hands the session to `fd` for resume `attempt`, unless a newer attempt
  // took it meanwhile: stops the server of the connection in use, records
  // the attempt, serves `fd`.
  void TakeOver(net::UniqueFd fd, const std::string& name, uint64_t instance,
                const std::shared_ptr<StreamSession>& session,
                uint64_t attempt);
  // Declines a session offer with `why` and logs it (at most one line per
  // period: a hostile peer may retry in a loop).
  void Refuse(const Greeting& greeting, const std::string& why);
  // Starts serving `fd`, after `predecessor` (the session's previous
  // connection, or null) stopped. Needs mu_.
  void ServeLocked(net::UniqueFd fd, const std::string& name, uint64_t instance,
                   std::shared_ptr<StreamSession> session,
                   std::unique_ptr<StreamServer> predecessor = nullptr);
  // Forgets finished servers, and sessions broken for longer than the peer
  // timeout. Needs mu_.
  void ForgetLocked();

  ProviderEnv env_;
  LogLimiter refused_{std::chrono::seconds(10)};
  std::mutex mu_;
  std::vector<std::unique_ptr<StreamServer>> servers_;  // guarded by mu_
  struct SessionEntry {
    std::shared_ptr<StreamSession> session;
    std::string resume_token;       // what a resume proves it holds
    Clock::time_point broken_at{};  // set once its server finished
    uint64_t attempt = 0;           // the last resume attempt taken
  };
  std::map<uint64_t, SessionEntry> sessions_;  // guarded by mu_, by id
};

StatusOr<std::unique_ptr<Transport>> StreamProvider::Connect(Dial& dial) {
  if (!dial.selection.allowed) return std::unique_ptr<Transport>();
  const DialedPeer& peer = *dial.peer;
  const std::string name = peer.reply->name();
  const uint64_t instance = peer.reply->instance();
  StreamTransport::Reconnect reconnect;
  const auto* offered = dynamic_cast<const SessionOffer*>(dial.pending.get());
  proto::StreamAnswer answer;
  const bool accepted = offered != nullptr && dial.answer != nullptr &&
                        dial.answer->declined().empty() &&
                        answer.ParseFromString(dial.answer->answer()) &&
                        answer.resume_token().size() == kResumeTokenBytes;
  if (offered != nullptr && dial.answer != nullptr &&
      !dial.answer->declined().empty()) {
    // Only a session id the listener holds already is declined: a 2^-64
    // chance, or someone offered ours first.
    LOG(WARNING) << "xfer: " << Printable(name) << " declined the tcp session ("
                 << Printable(dial.answer->declined(), 200)
                 << "): the connection cannot be re-established if it breaks";
  }
  if (accepted && peer.redial) {
    ResumeState state{offered->session, answer.resume_token(), 0};
    reconnect = [redial = peer.redial, state = std::move(state), name, instance,
                 provider = id()](
                    net::Deadline deadline) mutable -> StatusOr<net::UniqueFd> {
      // One attempt per try, also for tries that never reach the listener:
      // it takes only attempts above the last it took.
      ++state.attempt;
      StatusOr<Redialed> dialed = redial(
          [&](const proto::Hello& hello) {
            return ResumeOffer(state, provider, hello);
          },
          deadline);
      if (!dialed.ok()) {
        // Not there yet (refused, reset, silent): worth another try. A
        // refused proof is final.
        if (dialed.status().Is(StatusCode::kUnauthenticated)) {
          return dialed.status();
        }
        return NetworkError(dialed.status().message());
      }
      Redialed& r = *dialed;
      if (r.reply.instance() != instance) {
        return PeerLost(name +
                        " restarted (a new instance): its state is gone");
      }
      for (const proto::TransportAnswer& a : r.reply.answers()) {
        if (a.provider() != provider) continue;
        if (!a.declined().empty()) {
          return PeerLost(name + " cannot resume the connection: " +
                          Printable(a.declined(), 200));
        }
        proto::StreamAnswer resumed;
        if (resumed.ParseFromString(a.answer()) && resumed.resumed()) {
          return std::move(r.fd);
        }
      }
      return PeerLost(name + " did not resume the connection");
    };
  }
  return std::unique_ptr<Transport>(std::make_unique<StreamTransport>(
      std::move(*peer.fd), name, peer.peer_timeout, std::move(reconnect),
      peer.link_counters));
}

void StreamProvider::ForgetLocked() {
  const Clock::time_point now = Clock::now();
  for (auto& s : servers_) {
    if (s->finished() && s->session() != nullptr) {
      auto it = sessions_.find(s->session()->id());
      if (it != sessions_.end()) it->second.broken_at = now;
    }
  }
  std::erase_if(servers_, [](const auto& s) { return s->finished(); });
  const auto keep = std::chrono::milliseconds(env_.options->peer_timeout_ms);
  std::erase_if(sessions_, [&](const auto& e) {
    return e.second.broken_at != Clock::time_point{} &&
           now - e.second.broken_at > keep;
  });
}

void StreamProvider::Refuse(const Greeting& greeting, const std::string& why) {
  greeting.answer->set_declined(why);
  uint64_t held_back = 0;
  if (refused_.Allow(&held_back)) {
    LOG(WARNING) << env_.options->name << ": refused the tcp session offer of "
                 << greeting.hello->name() << " (instance "
                 << greeting.hello->instance() << "): " << why
                 << LogLimiter::HeldBack(held_back);
  }
}

void StreamProvider::ServeLocked(net::UniqueFd fd, const std::string& name,
                                 uint64_t instance,
                                 std::shared_ptr<StreamSession> session,
                                 std::unique_ptr<StreamServer> predecessor) {
  VLOG(1) << env_.options->name << ": serving " << name << " over tcp";
  servers_.push_back(std::make_unique<StreamServer>(
      std::move(fd), env_.regions, name, MapRegionHandler(), std::move(session),
      NotifyTargetFor(env_.notifications, instance,
                      env_.options->peer_timeout_ms),
      std::move(predecessor)));
}

std::function<void(net::UniqueFd)> StreamProvider::Answer(
    const Greeting& greeting) {
  proto::StreamOffer offer;
  const bool has_session = greeting.offer != nullptr &&
                           offer.ParseFromString(greeting.offer->offer()) &&
                           offer.session() != 0;
  if (has_session && offer.resume()) return AnswerResume(greeting, offer);
  const std::string name = greeting.hello->name();
  const uint64_t instance = greeting.hello->instance();
  std::shared_ptr<StreamSession> session;
  std::string token;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ForgetLocked();
    if (has_session && sessions_.contains(offer.session())) {
      // Taking it would reset what the session applied (and hand it to
      // whoever asked): the connection goes on without a session.
      Refuse(greeting, "session " + std::to_string(offer.session()) +
                           " is in use; a new connection offers a new one");
    } else if (has_session) {
      session = std::make_shared<StreamSession>(offer.session(), instance);
      token = NewNonce();
      proto::StreamAnswer answer;
      answer.set_resume_token(token);
      greeting.answer->set_answer(answer.SerializeAsString());
    }
  }
  return [this, name, instance, session,
          token = std::move(token)](net::UniqueFd fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (session != nullptr &&
        !sessions_.try_emplace(session->id(), SessionEntry{session, token})
             .second) {
      // Another hello took the id after ours was answered (only an
      // acceptor that answers hellos at once can let that happen): this
      // connection closes, the session stays with the other.
      LOG(WARNING) << env_.options->name << ": closed the new tcp session "
                   << session->id() << " of " << name
                   << ": another connection took its id meanwhile";
      return;
    }
    ServeLocked(std::move(fd), name, instance, session);
  };
}

std::function<void(net::UniqueFd)> StreamProvider::AnswerResume(
    const Greeting& greeting, const proto::StreamOffer& offer) {
  const std::string name = greeting.hello->name();
  const uint64_t instance = greeting.hello->instance();
  const uint64_t id = offer.session();
  const uint64_t attempt = offer.attempt();
  // A refused resume: the connection closes, and the connector gives up.
  auto close = [](net::UniqueFd) {};
  std::shared_ptr<StreamSession> session;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ForgetLocked();
    auto it = sessions_.find(id);
    if (it == sessions_.end() ||
        it->second.session->peer_instance() != instance) {
      greeting.answer->set_declined(
          "no session " + std::to_string(id) + " of " + name +
          " here (it broke more than the peer timeout ago, or this is a new "
          "instance)");
      return close;
    }
    const SessionEntry& e = it->second;
    if (!VerifyResumeProof(e.resume_token, id, attempt,
                           greeting.hello->auth_nonce(),
                           offer.resume_proof())) {
      Refuse(greeting, "the resume of session " + std::to_string(id) +
                           " does not prove the session's resume token");
      return close;
    }
    const uint64_t window =
        ResumeWindow(std::chrono::milliseconds(env_.options->peer_timeout_ms));
    if (attempt <= e.attempt) {
      // A hello the connector gave up on, delivered late, or a replay.
      Refuse(greeting, "a stale resume attempt (" + std::to_string(attempt) +
                           ", after " + std::to_string(e.attempt) + ")");
      return close;
    }
    if (attempt - e.attempt > window) {
      Refuse(greeting, "resume attempt " + std::to_string(attempt) +
                           " is more than " + std::to_string(window) +
                           " above the last taken (" +
                           std::to_string(e.attempt) + ")");
      return close;
    }
    session = e.session;
  }
  proto::StreamAnswer answer;
  answer.set_resumed(true);
  greeting.answer->set_answer(answer.SerializeAsString());
  // The take-over waits for the reply to go out: a resume whose reply
  // fails leaves the connection in use alone.
  return [this, name, instance, session, attempt](net::UniqueFd fd) {
    TakeOver(std::move(fd), name, instance, session, attempt);
  };
}

void StreamProvider::TakeOver(net::UniqueFd fd, const std::string& name,
                              uint64_t instance,
                              const std::shared_ptr<StreamSession>& session,
                              uint64_t attempt) {
  // All under the lock, the old server's stop too: however many resumes of
  // one session race, one connection at a time applies its requests.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session->id());
  if (it == sessions_.end() || it->second.session != session ||
      attempt <= it->second.attempt) {
    uint64_t held_back = 0;
    if (refused_.Allow(&held_back)) {
      LOG(WARNING) << env_.options->name << ": closed resume attempt "
                   << attempt << " of tcp session " << session->id() << " of "
                   << name << ": a newer attempt took the session meanwhile"
                   << LogLimiter::HeldBack(held_back);
    }
    return;  // `fd` closes; the connection in use goes on
  }
  it->second.attempt = attempt;
  it->second.broken_at = {};
  if (env_.link_counters != nullptr) {
    env_.link_counters->resumed.fetch_add(1, std::memory_order_relaxed);
  }
  // The old connection may still look alive from here (a reset seen by the
  // connector only): the new server stops it (and joins its thread, which
  // may be waiting for room in the notification ring) on its own thread
  // before it reads a request, so one connection at a time applies the
  // session's requests and this thread, the hello acceptor's, waits for
  // nobody.
  std::unique_ptr<StreamServer> old;
  for (auto& s : servers_) {
    if (s->session() != session) continue;
    LOG(INFO) << env_.options->name << ": " << name
              << " re-established its tcp connection; the broken one ends";
    s->Shutdown();
    old = std::move(s);
  }
  std::erase(servers_, nullptr);
  ServeLocked(std::move(fd), name, instance, session, std::move(old));
}

}  // namespace

std::shared_ptr<TransportProvider> MakeStreamProvider() {
  return std::make_shared<StreamProvider>();
}

}  // namespace ps::xfer::internal
