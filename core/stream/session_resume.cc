#include "core/stream/session_resume.h"

#include <arpa/inet.h>
#include <sodium.h>

#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {
namespace {

// What the proofs cover besides their inputs: a proof made for anything
// else keyed alike (there is nothing else) proves nothing here.
constexpr std::string_view kResumeProtocol = "xfer tcp resume v1";

}  // namespace

std::string ResumeProof(std::string_view token, uint64_t session,
                        uint64_t attempt, std::string_view auth_nonce) {
  // Idempotent and thread-safe; libsodium wants it before any other call.
  [[maybe_unused]] static const int sodium = sodium_init();
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(
      &state, reinterpret_cast<const unsigned char*>(token.data()),
      token.size());
  auto update = [&state](std::string_view part) {
    // Length-prefixed, so that no two different inputs concatenate alike.
    const uint32_t n = htonl(static_cast<uint32_t>(part.size()));
    crypto_auth_hmacsha256_update(
        &state, reinterpret_cast<const unsigned char*>(&n), sizeof(n));
    crypto_auth_hmacsha256_update(
        &state, reinterpret_cast<const unsigned char*>(part.data()),
        part.size());
  };
  auto number = [](uint64_t v) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
    return bytes;
  };
  update(kResumeProtocol);
  update(number(session));
  update(number(attempt));
  update(auth_nonce);
  std::string proof(kResumeProofBytes, '\0');
  static_assert(kResumeProofBytes == crypto_auth_hmacsha256_BYTES);
  crypto_auth_hmacsha256_final(&state,
                               reinterpret_cast<unsigned char*>(proof.data()));
  return proof;
}

bool VerifyResumeProof(std::string_view token, uint64_t session,
                       uint64_t attempt, std::string_view auth_nonce,
                       std::string_view proof) {
  if (token.size() != kResumeTokenBytes || proof.size() != kResumeProofBytes) {
    return false;
  }
  const std::string want = ResumeProof(token, session, attempt, auth_nonce);
  return sodium_memcmp(want.data(), proof.data(), kResumeProofBytes) == 0;
}

uint64_t ResumeWindow(std::chrono::milliseconds peer_timeout) {
  return 2 * MaxRedialTries(peer_timeout);
}

}  // namespace ps::xfer::internal
