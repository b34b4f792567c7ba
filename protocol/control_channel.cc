#include "protocol/control_channel.h"

#include <glog/logging.h>

#include <algorithm>

#include "net/connect.h"
#include "net/handshake_retry.h"
#include "net/message_frame.h"
#include "net/redial_backoff.h"
#include "net/socket_error.h"
#include "net/transfer.h"

namespace ps::protocol {

using net::Deadline;
using net::DeadlineIn;
using net::RecvAllBefore;
using net::WaitReadable;

int64_t BodyDeadlineMs(uint64_t bytes, int timeout_ms) {
  return timeout_ms + static_cast<int64_t>(bytes >> 20) * 1000;
}

Status SendControlMessage(int fd, const google::protobuf::MessageLite& m,
                          Deadline deadline) {
  const size_t bytes = m.ByteSizeLong();
  if (bytes > kMaxControlMessageBytes) {
    return InvalidArgument(m.GetTypeName() + " of " + std::to_string(bytes) +
                           " bytes exceeds the control message limit");
  }
  // The same framing as the xfer hello's (a length, then the message).
  return net::SendMessage(fd, m, deadline);
}

void SetControlError(const Status& s, proto::ControlReply* reply) {
  reply->Clear();
  reply->set_error(s.message());
  reply->set_error_code(static_cast<uint32_t>(s.code()));
}

Status RecvControlMessage(int fd, google::protobuf::MessageLite* m,
                          Deadline idle_deadline, int timeout_ms,
                          int keepalive_extension_ms) {
  uint32_t length = 0;
  for (;;) {
    PS_ASSIGN_OR_RETURN(bool ready, WaitReadable(fd, idle_deadline));
    if (!ready) return Timeout("no message and no keepalive in time");
    PS_RETURN_IF_ERROR(RecvAllBefore(fd, &length, sizeof(length),
                                     DeadlineIn(timeout_ms),
                                     "control message length"));
    if (length != kKeepaliveFrame) break;
    if (keepalive_extension_ms > 0) {
      idle_deadline = DeadlineIn(keepalive_extension_ms);
    }
  }
  if (length > kMaxControlMessageBytes) {
    return Corruption("control message of " + std::to_string(length) +
                      " bytes exceeds the limit: not a ps peer?");
  }
  const Deadline body = DeadlineIn(BodyDeadlineMs(length, timeout_ms));
  // Grow with what arrived (at most twice that, plus 64 KiB): a length
  // prefix alone must not make us allocate and zero 256 MiB.
  std::string bytes;
  size_t have = 0;
  while (have < length) {
    const size_t chunk =
        std::min<size_t>(length - have, std::max<size_t>(have, 64 << 10));
    bytes.resize(have + chunk);
    PS_RETURN_IF_ERROR(
        RecvAllBefore(fd, bytes.data() + have, chunk, body, "control message"));
    have += chunk;
  }
  if (!m->ParseFromString(bytes)) {
    return Corruption("malformed " + m->GetTypeName());
  }
  return Status::OK();
}

StatusOr<ControlClient> ControlClient::Connect(const std::string& address,
                                               const Options& options) {
  if (options.timeout_ms <= 0) {
    return InvalidArgument("control client timeout must be positive");
  }
  ControlClient client;
  client.address_ = address;
  client.options_ = options;
  PS_RETURN_IF_ERROR(net::RetryDroppedHandshake(
      "control connection to server " + address, DeadlineIn(options.timeout_ms),
      [&](Deadline deadline) -> Status {
        PS_ASSIGN_OR_RETURN(client.fd_,
                            net::ConnectTcp(address, net::MsUntil(deadline)));
        return client.Authenticate();
      }));
  return client;
}

Status ControlClient::Authenticate() {
  const std::string nonce = xfer::NewNonce();
  proto::ControlRequest hello;
  hello.mutable_auth()->set_nonce(nonce);
  bool unsent, closed;  // a failed authentication is not retried
  PS_ASSIGN_OR_RETURN(proto::ControlReply challenge,
                      CallOnce(hello, &unsent, &closed));
  const proto::AuthReply& a = challenge.auth();
  if (options_.secret.empty()) {
    if (a.proof().empty()) return Status::OK();  // neither side has one
    return Unauthenticated("server " + address_ +
                           " requires the cluster secret, and this client "
                           "has none (--cluster_secret_file or "
                           "$PS_CLUSTER_SECRET_FILE)");
  }
  if (a.proof().empty()) {
    return Unauthenticated("server " + address_ +
                           " has no cluster secret: a client with one does "
                           "not trust it");
  }
  if (!options_.secret.Verify(kControlAuthProtocol, xfer::AuthRole::kAcceptor,
                              a.nonce(), nonce, a.proof())) {
    return Unauthenticated("server " + address_ +
                           " failed to prove the cluster secret (a different "
                           "secret?)");
  }
  proto::ControlRequest proof;
  proof.mutable_auth()->set_proof(options_.secret.Prove(
      kControlAuthProtocol, xfer::AuthRole::kConnector, a.nonce(), nonce));
  PS_ASSIGN_OR_RETURN(proto::ControlReply done,
                      CallOnce(proof, &unsent, &closed));
  if (!done.auth().authenticated()) {
    return Unauthenticated("server " + address_ +
                           " did not confirm the authentication");
  }
  return Status::OK();
}

bool SafeToRepeat(const proto::ControlRequest& request) {
  switch (request.request_case()) {
    case proto::ControlRequest::kHello:
    case proto::ControlRequest::kExactPull:
    case proto::ControlRequest::kStats:
    case proto::ControlRequest::kStatus:
    case proto::ControlRequest::kAuth:
    case proto::ControlRequest::kServeHello:  // a replica replaces the
      return true;                            // connection's session

    case proto::ControlRequest::kCheckpoint:
      switch (request.checkpoint().action()) {
        case proto::CheckpointRequest::INFO:
        case proto::CheckpointRequest::DUE:
        case proto::CheckpointRequest::POSITION:
        case proto::CheckpointRequest::PART:
        case proto::CheckpointRequest::RESTORE:
          return true;
        default:
          return false;  // CUT starts a checkpoint
      }
    case proto::ControlRequest::kExactPush:
    case proto::ControlRequest::kShutdown:
    case proto::ControlRequest::REQUEST_NOT_SET:
      return false;
  }
  return false;
}

StatusOr<proto::ControlReply> ControlClient::CallOnce(
    const proto::ControlRequest& request, bool* unsent, bool* closed) {
  const std::string where = "server " + address_;
  *unsent = true;
  *closed = false;
  if (!fd_.valid()) {
    return PeerLost(where +
                    ": this connection was given up after an earlier error");
  }
  const int t = options_.timeout_ms;
  Status s =
      SendControlMessage(fd_.get(), request,
                         DeadlineIn(BodyDeadlineMs(request.ByteSizeLong(), t)));
  proto::ControlReply reply;
  if (s.ok()) {
    *unsent = false;
    s = RecvControlMessage(fd_.get(), &reply, DeadlineIn(t), t, t);
  }
  if (!s.ok()) {
    *closed = net::ClosedInOrder(fd_.get());
    // The stream is out of step now (a reply may still come): later calls
    // must not read it as theirs.
    fd_.Reset();
    if (s.Is(StatusCode::kTimeout)) {
      return Timeout(
          where + ": no reply and no keepalive for " + std::to_string(t) +
          " ms: the server is stuck or unreachable (" + s.message() + ")");
    }
    return s.WithContext(where);
  }
  if (!reply.error().empty()) {
    const bool known =
        reply.error_code() > 0 &&
        reply.error_code() <= static_cast<uint32_t>(kLastStatusCode);
    return Status(known ? static_cast<StatusCode>(reply.error_code())
                        : StatusCode::kInvalidArgument,
                  where + ": " + reply.error());
  }
  return reply;
}

Status ControlClient::Redial(net::Deadline deadline) {
  net::RedialBackoff backoff;
  Status last;
  while (net::Deadline::clock::now() < deadline) {
    Options once = options_;
    once.timeout_ms = net::MsUntil(deadline);
    StatusOr<ControlClient> fresh = Connect(address_, once);
    if (fresh.ok()) {
      StatusOr<proto::ControlReply> r = fresh->Call(*rejoin_);
      if (!r.ok()) fresh = r.status();
    }
    if (fresh.ok()) {
      fd_ = std::move(fresh->fd_);
      return Status::OK();
    }
    last = fresh.status();
    if (last.Is(StatusCode::kUnauthenticated) ||
        last.Is(StatusCode::kInvalidArgument)) {
      return last;  // a new connection will not do better
    }
    backoff.Pause();
  }
  return Timeout("could not reconnect within " +
                 std::to_string(options_.timeout_ms) +
                 " ms (last: " + last.ToString() + ")");
}

StatusOr<proto::ControlReply> ControlClient::Call(
    const proto::ControlRequest& request) {
  bool unsent = false, closed = false;
  StatusOr<proto::ControlReply> reply = CallOnce(request, &unsent, &closed);
  const net::Deadline deadline = DeadlineIn(options_.timeout_ms);
  // A reset (not a timeout, not an orderly close) while the server lives.
  while (rejoin_.has_value() && !closed &&
         net::IsBrokenConnection(reply.status()) &&
         (unsent || SafeToRepeat(request))) {
    const Status broken = reply.status();
    Status s = Redial(deadline);
    if (!s.ok()) {
      return Status(broken.code(),
                    broken.message() + "; reconnecting failed: " + s.message());
    }
    LOG(WARNING) << "control connection to server " << address_
                 << " re-established after: " << broken;
    reply = CallOnce(request, &unsent, &closed);
  }
  return reply;
}

}  // namespace ps::protocol
