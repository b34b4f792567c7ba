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

}  // namespace ps::net
