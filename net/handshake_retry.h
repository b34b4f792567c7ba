// net::RetryDroppedHandshake: the connector's side of a handshake that the
// listener may give up. A listener cuts every handshake off at its own
// deadline (HandshakeGate, kDefaultHandshakeTimeoutMs); on a lossy path,
// retransmissions (a lost SYN costs 1 s, then 2 s) can stretch a few round
// trips past it although both ends are up. The connector then sees its
// connection closed or reset in the middle of the handshake (kPeerLost) and
// should dial again rather than fail, for as long as its own deadline
// allows. Any other failure (refused, timed out, not authenticated, a
// protocol error) is returned at once: a new connection would not help.
//
// Thread safety: a function of its arguments; `attempt` runs on the
// caller's thread.
#pragma once

#include <functional>
#include <string_view>

#include "base/status.h"
#include "net/unique_fd.h"

namespace ps::net {

// Runs attempt(deadline) (dial and handshake) until it succeeds, fails with
// anything but kPeerLost, or no time is left before `deadline`; waits 10 ms
// before the second attempt, doubling up to 200 ms. Logs each retry with
// `what` ("control connection to 10.0.0.1:4000"). Returns the last
// attempt's status.
Status RetryDroppedHandshake(std::string_view what, Deadline deadline,
                             const std::function<Status(Deadline)>& attempt);

}  // namespace ps::net
