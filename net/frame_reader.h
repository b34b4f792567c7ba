// FrameReader: collects one frame (net/message_frame.h: a 4-byte
// little-endian length, then the message) from a non-blocking socket as its
// bytes arrive, so that one thread can serve many half-received handshakes
// without waiting on any: Read() takes what is there and says whether the
// frame is complete. A length over the reader's limit is refused as soon as
// its 4 bytes are in, so a peer that announces a large frame costs nothing;
// one within the limit costs that length (at most the limit) from then on.
//
// Thread-safety: one reader per connection, used by one thread at a time.
#pragma once

#include <google/protobuf/message_lite.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ps::net {

class FrameReader {
 public:
  // `what` names the frames in messages ("hello"); frames over `max_bytes`
  // are refused.
  FrameReader(std::string_view what, uint32_t max_bytes)
      : what_(what), max_bytes_(max_bytes) {}

  // OK with *complete false: more bytes are needed. kPeerLost: the peer
  // closed; kInvalidArgument: a length over the limit; kNetwork: a socket
  // error.
  Status Read(int fd, bool* complete);
  // Parses the completed frame into `message` and resets for the next.
  Status Parse(google::protobuf::MessageLite* message);

 private:
  std::string what_;
  uint32_t max_bytes_;
  unsigned char length_bytes_[4] = {};
  size_t length_have_ = 0;
  std::string body_;
  size_t body_have_ = 0;
};

}  // namespace ps::net
