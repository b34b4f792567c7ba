// The hello that opens every xfer connection: each side names itself (name,
// instance, host identity) before any operation, so a peer knows whom it
// serves and whether it shares the host. With a cluster secret the hello
// also carries the challenge-response of core/auth.h. Messages are protobuf,
// framed by a 4-byte little-endian length.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "core/auth.h"
#include "core/descriptor.pb.h"
#include "net/frame_reader.h"
#include "net/message_frame.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

// Frames beyond this are refused: a hello is a few hundred bytes.
constexpr uint32_t kMaxHelloBytes = 64 * 1024;
// The protocol name the xfer hello's proofs cover (core/auth.h).
inline constexpr char kXferAuthProtocol[] = "xfer hello v1";

// Hello frames go out with net::SendMessage (net/message_frame.h) and come
// in through a net::FrameReader of kMaxHelloBytes.
using net::SendMessage;

// One framed message (net/message_frame.h) of at most kMaxHelloBytes,
// received whole before `deadline` (kTimeout otherwise, however slowly the
// bytes come; the default waits for ever, for connections whose requests may
// be far apart).
Status RecvMessage(int fd, google::protobuf::MessageLite* message,
                   net::Deadline deadline = net::Deadline::max());

// Who says hello: a Context's name, instance, host identity and secret,
// copied so that a transport can say hello again (a reconnect) after the
// Context is gone.
struct HelloIdentity {
  std::string name;
  uint64_t instance = 0;
  std::string host_id;
  ClusterSecret secret;
};

// The connector's first message (with a fresh nonce when there is a secret);
// the caller adds its transport offers.
proto::Hello MakeHello(const HelloIdentity& me);

// Sends `hello` on `fd`, runs the challenge-response when either side has a
// secret, and returns the listener's real reply (its refusal as a Status);
// all of it before `deadline`. `address` is for messages.
StatusOr<proto::HelloReply> Handshake(const HelloIdentity& me, int fd,
                                      const proto::Hello& hello,
                                      const std::string& address,
                                      net::Deadline deadline);

// "boot id/hostname/net namespace/IPC namespace": equal for two processes
// exactly when they share a kernel and its namespaces, and with them memfds
// and abstract Unix sockets. Processes in two containers (or network
// namespaces) on one machine differ.
std::string HostIdentity();

}  // namespace ps::xfer::internal
