#include "net/handshake_retry.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace ps::net {

Status RetryDroppedHandshake(std::string_view what, Deadline deadline,
                             const std::function<Status(Deadline)>& attempt) {
  auto backoff = std::chrono::milliseconds(10);
  for (int attempts = 1;; ++attempts) {
    Status s = attempt(deadline);
    if (!s.Is(StatusCode::kPeerLost) ||
        Deadline::clock::now() + backoff >= deadline) {
      return s;
    }
    LOG(WARNING) << what << ": the peer dropped the connection during the "
                 << "handshake (attempt " << attempts << ": " << s
                 << "); dialing again";
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

}  // namespace ps::net
