// The hello that opens every xfer connection: each side names itself (name,
// instance, host identity) before any operation, so a peer knows whom it
// serves and whether it shares the host. Messages are protobuf, framed by a
// 4-byte little-endian length.
#pragma once

#include <string>

#include "base/status.h"
#include "core/descriptor.pb.h"

namespace ps::xfer::internal {

// Frames beyond this are refused: a hello is a few hundred bytes.
constexpr uint32_t kMaxHelloBytes = 64 * 1024;

Status SendMessage(int fd, const google::protobuf::MessageLite& message);
Status RecvMessage(int fd, google::protobuf::MessageLite* message);

// "boot id/hostname": equal for two processes exactly when they share a
// kernel, and with it memfds and abstract Unix sockets.
std::string HostIdentity();

}  // namespace ps::xfer::internal
