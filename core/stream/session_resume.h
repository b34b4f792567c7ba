// What a tcp connector must show to resume a session (core/stream/stream.proto)
// on a new connection, so that no other peer can take the session over, even
// one that knows the cluster secret and the session's id:
//   - a proof that it holds the session's resume token, a random key the
//     listener gave only to the connector that opened the session (in its
//     hello reply, after the cluster-secret proof when there is a secret).
//     The proof is an HMAC-SHA256 keyed by the token over the session id,
//     the resume attempt and the hello's auth_nonce: the token never travels
//     again, and a proof is good for one attempt only;
//   - an attempt just above the last one the listener took (ResumeWindow), so
//     a replayed offer, or one that names a far attempt to lock the real
//     connector out, is refused.
// What it does not do, as core/auth.h: the traffic is not encrypted, so
// someone who reads the path (and with it the token) can still resume.
//
// Thread-safe: pure functions.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/auth.h"

namespace ps::xfer::internal {

// Bytes of a resume token (core/auth.h's NewNonce) and of a proof.
inline constexpr size_t kResumeTokenBytes = kNonceBytes;
inline constexpr size_t kResumeProofBytes = kProofBytes;

// The proof a resume offer carries: HMAC-SHA256 keyed by `token` over a
// protocol label, `session`, `attempt` and `auth_nonce` (the hello's; empty
// without a cluster secret), each length-prefixed.
std::string ResumeProof(std::string_view token, uint64_t session,
                        uint64_t attempt, std::string_view auth_nonce);

// Whether `proof` is ResumeProof of the same inputs (compared in constant
// time). False for a token of the wrong size (none was handed out).
bool VerifyResumeProof(std::string_view token, uint64_t session,
                       uint64_t attempt, std::string_view auth_nonce,
                       std::string_view proof);

// How far above the last attempt it took a listener whose peer timeout is
// `peer_timeout` accepts a resume attempt. The connector counts one attempt
// per redial try, also for tries that never reached the listener (refused,
// lost), and tries for at most its peer timeout, while the listener forgets a
// session broken for longer than its own: twice the most tries the
// reconnect loop makes in that time (MaxRedialTries) leaves room for two
// loops in a row whose tries all went astray, and for a connector whose
// clock runs a little ahead. A connector with a much longer peer timeout
// than the listener's may run out of window; it then loses the peer, as it
// would once the listener forgot its session.
uint64_t ResumeWindow(std::chrono::milliseconds peer_timeout);

}  // namespace ps::xfer::internal
