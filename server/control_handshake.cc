#include "server/control_handshake.h"

#include <utility>

#include "net/connect.h"

namespace ps::server {
namespace {

Status NeedsTheSecret(const std::string& address) {
  return Unauthenticated("server " + address +
                         " requires the cluster secret "
                         "(--cluster_secret_file or $PS_CLUSTER_SECRET_FILE)");
}

}  // namespace

StatusOr<net::Handshake::Next> ControlHandshake::OnReadable(int fd) {
  bool complete = false;
  Status s = reader_.Read(fd, &complete);
  if (!s.ok()) {
    // A peer that hangs up before its first message is a port probe; one
    // that hangs up when challenged did not know the secret.
    if (s.Is(StatusCode::kPeerLost)) {
      if (stage_ == Stage::kFirst) return Next::kClose;
      return Unauthenticated(
          "it hung up instead of proving the cluster secret");
    }
    return s;
  }
  if (!complete) return Next::kMore;
  proto::ControlRequest request;
  PS_RETURN_IF_ERROR(reader_.Parse(&request));
  const xfer::ClusterSecret& secret = service_.secret;
  if (stage_ == Stage::kFirst) {
    if (request.has_auth() && !request.auth().nonce().empty()) {
      return Challenge(fd, request.auth().nonce());
    }
    if (!secret.empty()) return Refuse(fd, NeedsTheSecret(service_.address));
    if (request.has_auth()) {
      // A proof-less AUTH to a server without a secret: nothing to prove.
      proto::ControlReply reply;
      reply.mutable_auth()->set_authenticated(true);
      return Complete(fd, std::move(reply));
    }
    // Served once the connection is established; a refusal is its reply.
    first_request_ = std::move(request);
    if (Status admitted = service_.admit(); !admitted.ok()) {
      return Refuse(fd, admitted);
    }
    return Next::kDone;
  }
  if (!request.has_auth() ||
      !secret.Verify(protocol::kControlAuthProtocol, xfer::AuthRole::kConnector,
                     server_nonce_, client_nonce_, request.auth().proof())) {
    return Refuse(fd, Unauthenticated(
                          "authentication failed: a different cluster secret"));
  }
  proto::ControlReply reply;
  reply.mutable_auth()->set_authenticated(true);
  return Complete(fd, std::move(reply));
}

StatusOr<net::Handshake::Next> ControlHandshake::Challenge(
    int fd, const std::string& client_nonce) {
  if (client_nonce.size() != xfer::kNonceBytes) {
    return Refuse(
        fd, InvalidArgument("auth nonce of " +
                            std::to_string(client_nonce.size()) + " bytes"));
  }
  client_nonce_ = client_nonce;
  proto::ControlReply reply;
  proto::AuthReply* a = reply.mutable_auth();
  const xfer::ClusterSecret& secret = service_.secret;
  // Without a secret there is nothing to prove: the client (which has none
  // either, or it would refuse us) is done.
  if (secret.empty()) return Complete(fd, std::move(reply));
  server_nonce_ = xfer::NewNonce();
  a->set_nonce(server_nonce_);
  a->set_proof(secret.Prove(protocol::kControlAuthProtocol,
                            xfer::AuthRole::kAcceptor, server_nonce_,
                            client_nonce_));
  Status s = protocol::SendControlMessage(
      fd, reply, net::DeadlineIn(net::kHandshakeReplySendMs));
  if (!s.ok()) return s.WithContext("challenge");
  stage_ = Stage::kProof;
  return Next::kMore;
}

StatusOr<net::Handshake::Next> ControlHandshake::Complete(
    int fd, proto::ControlReply reply) {
  if (Status admitted = service_.admit(); !admitted.ok()) {
    return Refuse(fd, admitted);
  }
  Status s = protocol::SendControlMessage(
      fd, reply, net::DeadlineIn(net::kHandshakeReplySendMs));
  if (!s.ok()) return s.WithContext("handshake reply");
  return Next::kDone;
}

Status ControlHandshake::Refuse(int fd, const Status& why) {
  proto::ControlReply reply;
  protocol::SetControlError(why, &reply);
  (void)protocol::SendControlMessage(
      fd, reply, net::DeadlineIn(net::kHandshakeReplySendMs));
  return why;
}

void ControlHandshake::Adopt(net::UniqueFd fd) {
  service_.adopt(std::move(fd), std::move(first_request_));
}

}  // namespace ps::server
