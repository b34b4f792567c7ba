#include "core/stream/stream_provider.h"

#include <glog/logging.h>

#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "core/internal/context_impl.h"
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
  // Forgets finished servers, and sessions broken for longer than the peer
  // timeout. Needs mu_.
  void ForgetLocked();

  ProviderEnv env_;
  std::mutex mu_;
  std::vector<std::unique_ptr<StreamServer>> servers_;  // guarded by mu_
  struct SessionEntry {
    std::shared_ptr<StreamSession> session;
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
  const bool accepted =
      dial.answer != nullptr && dial.answer->answer() == "session";
  if (offered != nullptr && accepted && peer.redial) {
    proto::TransportOffer resume;
    resume.set_provider(id());
    resume.set_name("tcp");
    proto::StreamOffer so;
    so.set_session(offered->session);
    so.set_resume(true);
    reconnect = [redial = peer.redial, resume, so, name, instance,
                 provider = id()](
                    net::Deadline deadline) mutable -> StatusOr<net::UniqueFd> {
      so.set_attempt(so.attempt() + 1);
      resume.set_offer(so.SerializeAsString());
      StatusOr<Redialed> dialed = redial(resume, deadline);
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
        if (a.provider() == provider && !a.declined().empty()) {
          return PeerLost(name +
                          " cannot resume the connection: " + a.declined());
        }
      }
      return std::move(r.fd);
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

std::function<void(net::UniqueFd)> StreamProvider::Answer(
    const Greeting& greeting) {
  proto::StreamOffer offer;
  const bool has_session = greeting.offer != nullptr &&
                           offer.ParseFromString(greeting.offer->offer()) &&
                           offer.session() != 0;
  const std::string name = greeting.hello->name();
  const uint64_t instance = greeting.hello->instance();
  std::lock_guard<std::mutex> lock(mu_);
  ForgetLocked();
  std::shared_ptr<StreamSession> session;
  std::unique_ptr<StreamServer> old;  // the session's broken connection
  if (has_session && offer.resume()) {
    auto it = sessions_.find(offer.session());
    if (it == sessions_.end() ||
        it->second.session->peer_instance() != instance) {
      greeting.answer->set_declined(
          "no session " + std::to_string(offer.session()) + " of " + name +
          " here (it broke more than the peer timeout ago, or this is a new "
          "instance)");
      return [](net::UniqueFd) {};  // the connector gives up
    }
    if (offer.attempt() <= it->second.attempt) {
      LOG(INFO) << env_.options->name << ": ignored a stale resume attempt ("
                << offer.attempt() << ", after " << it->second.attempt
                << ") of " << name;
      greeting.answer->set_declined("a stale resume attempt");
      return [](net::UniqueFd) {};  // its connector moved on long ago
    }
    it->second.attempt = offer.attempt();
    if (env_.link_counters != nullptr) {
      env_.link_counters->resumed.fetch_add(1, std::memory_order_relaxed);
    }
    session = it->second.session;
    it->second.broken_at = {};
    // The old connection may still look alive from here (a reset seen by
    // the connector only): its server stops before the new one starts, so
    // one connection at a time applies the session's requests.
    for (auto& s : servers_) {
      if (s->session() == session) old = std::move(s);
    }
    std::erase(servers_, nullptr);
  } else if (has_session) {
    session = std::make_shared<StreamSession>(offer.session(), instance);
    sessions_[offer.session()] = SessionEntry{session, {}, 0};
  }
  if (session != nullptr) greeting.answer->set_answer("session");
  return [this, name, instance, session,
          old = std::shared_ptr<StreamServer>(std::move(old))](
             net::UniqueFd fd) mutable {
    if (old != nullptr) {
      LOG(INFO) << env_.options->name << ": " << name
                << " re-established its tcp connection; the broken one ends";
      old.reset();  // shuts it down and joins its thread
    }
    VLOG(1) << env_.options->name << ": serving " << name << " over tcp";
    auto server = std::make_unique<StreamServer>(
        std::move(fd), env_.regions, name, MapRegionHandler(), session,
        NotifyTargetFor(env_.notifications, instance,
                        env_.options->peer_timeout_ms));
    std::lock_guard<std::mutex> lock(mu_);
    servers_.push_back(std::move(server));
  };
}

}  // namespace

std::shared_ptr<TransportProvider> MakeStreamProvider() {
  return std::make_shared<StreamProvider>();
}

}  // namespace ps::xfer::internal
