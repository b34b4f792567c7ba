// The frame that carries one protobuf message over a stream socket: a 4-byte
// little-endian length, then the message. The xfer hello (core/hello.h) and
// the control channel (protocol/control_channel.h) both speak it; each reads
// frames with its own limits.
//
// Thread safety: no shared state; one sender per socket at a time.
#pragma once

#include <google/protobuf/message_lite.h>

#include "base/status.h"
#include "net/unique_fd.h"

namespace ps::net {

// Sends `message` in one frame, whole before `deadline` (kTimeout otherwise,
// however slowly the peer takes the bytes; the default waits for ever).
Status SendMessage(int fd, const google::protobuf::MessageLite& message,
                   Deadline deadline = Deadline::max());

}  // namespace ps::net
