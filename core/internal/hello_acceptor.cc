#include "core/internal/hello_acceptor.h"

#include <glog/logging.h>

#include <utility>

#include "base/printable.h"
#include "core/internal/hello.h"

namespace ps::xfer::internal {
namespace {

// One connection's xfer hello: the Hello, then with a secret our challenge
// and the peer's AuthProof, then OnHello's reply.
class XferHello : public net::Handshake {
 public:
  XferHello(const HelloAcceptor::Options& options,
            const HelloAcceptor::OnHello& on_hello, bool same_host)
      : options_(options), on_hello_(on_hello), same_host_(same_host) {}

  StatusOr<Next> OnReadable(int fd) override {
    for (;;) {
      bool complete = false;
      Status s = reader_.Read(fd, &complete);
      if (!s.ok()) {
        // A peer that hung up before its hello (a port probe) is not news;
        // one that hangs up when challenged did not know the secret.
        if (s.Is(StatusCode::kPeerLost)) {
          if (stage_ == Stage::kHello) return Next::kClose;
          return Unauthenticated(
              "it hung up instead of proving the cluster secret");
        }
        return s;
      }
      if (!complete) return Next::kMore;
      if (stage_ == Stage::kHello) {
        PS_RETURN_IF_ERROR(reader_.Parse(&hello_));
        if (options_.secret.empty()) return Finish(fd);
        if (hello_.auth_nonce().size() != kNonceBytes) {
          return Refuse(
              fd, Unauthenticated("it did not offer to authenticate; this "
                                  "cluster needs the cluster secret "
                                  "(--cluster_secret_file or "
                                  "$PS_CLUSTER_SECRET_FILE)"));
        }
        nonce_ = NewNonce();
        proto::HelloReply challenge;
        challenge.set_name(options_.name);
        challenge.set_auth_nonce(nonce_);
        challenge.set_auth_proof(
            options_.secret.Prove(kXferAuthProtocol, AuthRole::kAcceptor,
                                  nonce_, hello_.auth_nonce()));
        s = SendMessage(fd, challenge,
                        net::DeadlineIn(net::kHandshakeReplySendMs));
        if (!s.ok()) return s.WithContext("challenge");
        stage_ = Stage::kProof;
        continue;  // the proof may be here already
      }
      proto::AuthProof proof;
      PS_RETURN_IF_ERROR(reader_.Parse(&proof));
      if (!options_.secret.Verify(kXferAuthProtocol, AuthRole::kConnector,
                                  nonce_, hello_.auth_nonce(), proof.proof())) {
        return Refuse(fd, Unauthenticated("authentication failed (a different "
                                          "cluster secret)"));
      }
      return Finish(fd);
    }
  }

  void Adopt(net::UniqueFd fd) override { adopt_(std::move(fd)); }

  int progress() const override { return stage_ == Stage::kHello ? 0 : 1; }

  std::string claimed_name() const override {
    return hello_.name().empty() ? "" : "\"" + Printable(hello_.name()) + "\"";
  }

 private:
  enum class Stage { kHello, kProof };

  // Tells the peer why before the gate closes the connection.
  Status Refuse(int fd, const Status& why) {
    proto::HelloReply reply;
    reply.set_name(options_.name);
    reply.set_error(why.message());
    reply.set_error_code(static_cast<uint32_t>(why.code()));
    (void)SendMessage(fd, reply, net::DeadlineIn(net::kHandshakeReplySendMs));
    return why;
  }

  // The hello is complete (and proved): OnHello answers it.
  StatusOr<Next> Finish(int fd) {
    // Every log line of every provider names the peer by this: a name with
    // a line break or an escape sequence must not forge or colour one.
    hello_.set_name(Printable(hello_.name()));
    HelloAcceptor::Answer answer = on_hello_(hello_, same_host_);
    Status s = SendMessage(fd, answer.reply,
                           net::DeadlineIn(net::kHandshakeReplySendMs));
    if (!s.ok()) return s.WithContext("hello reply");
    if (!answer.reply.error().empty() || !answer.adopt) return Next::kClose;
    adopt_ = std::move(answer.adopt);
    return Next::kDone;
  }

  const HelloAcceptor::Options& options_;
  const HelloAcceptor::OnHello& on_hello_;
  const bool same_host_;
  Stage stage_ = Stage::kHello;
  net::FrameReader reader_{"hello", kMaxHelloBytes};
  proto::Hello hello_;
  std::string nonce_;  // ours, sent in the challenge
  std::function<void(net::UniqueFd)> adopt_;
};

}  // namespace

StatusOr<std::unique_ptr<HelloAcceptor>> HelloAcceptor::Start(
    Options options, std::vector<Listener> listeners, OnHello on_hello) {
  std::unique_ptr<HelloAcceptor> a(new HelloAcceptor);
  a->options_ = std::move(options);
  a->on_hello_ = std::move(on_hello);
  std::vector<net::UniqueFd> fds;
  for (Listener& l : listeners) {
    a->same_host_.push_back(l.same_host);
    fds.push_back(std::move(l.fd));
  }
  net::HandshakeGate::Options gate;
  gate.name = a->options_.name;
  gate.handshake_timeout_ms = a->options_.hello_timeout_ms;
  gate.max_handshakes = a->options_.max_pending;
  PS_ASSIGN_OR_RETURN(
      a->gate_, net::HandshakeGate::Start(
                    std::move(gate), std::move(fds),
                    [p = a.get()](size_t listener, int, const std::string&) {
                      return std::make_unique<XferHello>(
                          p->options_, p->on_hello_, p->same_host_[listener]);
                    }));
  return a;
}

}  // namespace ps::xfer::internal
