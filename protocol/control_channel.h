// ControlChannel: the TCP connection between a worker and a server that
// carries ControlRequest / ControlReply messages (hello and cluster info,
// exact-key pushes and pulls, stats, shutdown), each framed by a 4-byte
// little-endian length. One request, one reply, in order.
#pragma once

#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "core/socket.h"
#include "protocol/ps.pb.h"

namespace ps::protocol {

// Messages over this size are refused (a corrupt length must not make a
// process allocate gigabytes).
inline constexpr uint32_t kMaxControlMessageBytes = 256u << 20;

Status SendControlMessage(int fd, const google::protobuf::MessageLite& m);
Status RecvControlMessage(int fd, google::protobuf::MessageLite* m);

// The worker's side: connect, then Call() for each request.
class ControlClient {
 public:
  static StatusOr<ControlClient> Connect(const std::string& address,
                                         int timeout_ms);
  // Sends `request` and waits for the reply; a reply with an error becomes
  // a Status (kInvalidArgument unless the text says otherwise).
  StatusOr<proto::ControlReply> Call(const proto::ControlRequest& request);
  const std::string& address() const { return address_; }

 private:
  xfer::internal::UniqueFd fd_;
  std::string address_;
};

}  // namespace ps::protocol
