#include "net/handshake_retry.h"

#include <glog/logging.h>

#include "net/redial_backoff.h"

namespace ps::net {

Status RetryDroppedHandshake(std::string_view what, Deadline deadline,
                             const std::function<Status(Deadline)>& attempt) {
  RedialBackoff backoff;
  for (int attempts = 1;; ++attempts) {
    Status s = attempt(deadline);
    if (!s.Is(StatusCode::kPeerLost) || !backoff.Fits(deadline)) return s;
    LOG(WARNING) << what << ": the peer dropped the connection during the "
                 << "handshake (attempt " << attempts << ": " << s
                 << "); dialing again";
    backoff.Pause();
  }
}

}  // namespace ps::net
