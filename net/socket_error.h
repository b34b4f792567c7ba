// net::SocketError: the Status for a failed socket call. A peer that closed
// or reset the connection (or a socket shut down under the call) is
// kPeerLost, anything else kNetwork; the message is "what: strerror".
//
// Thread safety: a pure function.
#pragma once

#include <string_view>

#include "base/status.h"

namespace ps::net {

Status SocketError(std::string_view what, int err);

// True for what SocketError calls a broken connection (kPeerLost or
// kNetwork), which a new connection may replace; false for a timeout, a
// protocol error or OK.
inline bool IsBrokenConnection(const Status& s) {
  return s.Is(StatusCode::kPeerLost) || s.Is(StatusCode::kNetwork);
}

}  // namespace ps::net
