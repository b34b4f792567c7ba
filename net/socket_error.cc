#include "net/socket_error.h"

#include <cerrno>

namespace ps::net {

Status SocketError(std::string_view what, int err) {
  const bool lost =
      err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ESHUTDOWN;
  return ErrnoStatus(lost ? StatusCode::kPeerLost : StatusCode::kNetwork, what,
                     err);
}

}  // namespace ps::net
