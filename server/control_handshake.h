// ControlHandshake: the control port's handshake (protocol/control_channel.h),
// one per connection, as the service's net::HandshakeGate runs it.
//
// Until it completes, a connection may send only small messages
// (protocol::kMaxHandshakeMessageBytes, a few KiB: a larger length prefix
// closes it before a byte of the body is read), and only these:
// - with a cluster secret: AUTH with the client's nonce, answered with ours
//   and our proof; then AUTH with the client's proof, answered
//   "authenticated". Anything else, or a wrong proof, is refused with a
//   reply that says why, and the connection closes.
// - without one: the client's AUTH nonce, answered without a proof (the
//   client, which has no secret either, accepts that); or, from a client
//   that does not open with AUTH, its first request, which the service then
//   serves as usual.
// Before the final answer the handshake asks the service to admit the
// connection (its cap on established connections); a refusal is told to
// the client (kResourceExhausted) and closes the connection.
//
// Thread-safety: used by the gate's thread only.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/auth.h"
#include "net/frame_reader.h"
#include "net/handshake_gate.h"
#include "protocol/control_channel.h"
#include "protocol/ps.pb.h"

namespace ps::server {

class ControlHandshake : public net::Handshake {
 public:
  struct Service {
    std::string address;  // the service's, for replies ("server H:P ...")
    xfer::ClusterSecret secret;
    // May one more connection be established? (the service's cap)
    std::function<Status()> admit;
    // Takes an established connection, with the request to serve first
    // (a client without a secret that did not open with AUTH).
    std::function<void(net::UniqueFd fd,
                       std::optional<proto::ControlRequest> first)>
        adopt;
  };

  explicit ControlHandshake(const Service& service) : service_(service) {}

  StatusOr<Next> OnReadable(int fd) override;
  void Adopt(net::UniqueFd fd) override;
  int progress() const override { return stage_ == Stage::kFirst ? 0 : 1; }

 private:
  enum class Stage { kFirst, kProof };

  // Answers the client's nonce (with a secret: our nonce and proof).
  StatusOr<Next> Challenge(int fd, const std::string& client_nonce);
  // Admits the connection and sends `reply` (or the refusal): kDone.
  StatusOr<Next> Complete(int fd, proto::ControlReply reply);
  // Sends `why` as an error reply; returns it, which refuses the peer.
  Status Refuse(int fd, const Status& why);

  const Service& service_;
  Stage stage_ = Stage::kFirst;
  net::FrameReader reader_{"control handshake message",
                           protocol::kMaxHandshakeMessageBytes};
  std::string client_nonce_;
  std::string server_nonce_;
  std::optional<proto::ControlRequest> first_request_;
};

}  // namespace ps::server
