#include "core/stream/session_resume.h"

#include "core/stream/stream_transport.h"

namespace ps::xfer::internal {
namespace {

// What the proofs cover besides their inputs: a proof made for anything
// else keyed alike (there is nothing else) proves nothing here.
constexpr std::string_view kResumeProtocol = "xfer tcp resume v1";

// A number as the proofs cover it: 8 bytes, little-endian.
std::string Bytes(uint64_t v) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  return bytes;
}

}  // namespace

std::string ResumeProof(std::string_view token, uint64_t session,
                        uint64_t attempt, std::string_view auth_nonce) {
  return AuthCode(
      token, {kResumeProtocol, Bytes(session), Bytes(attempt), auth_nonce});
}

bool VerifyResumeProof(std::string_view token, uint64_t session,
                       uint64_t attempt, std::string_view auth_nonce,
                       std::string_view proof) {
  if (token.size() != kResumeTokenBytes) return false;
  return VerifyAuthCode(
      token, {kResumeProtocol, Bytes(session), Bytes(attempt), auth_nonce},
      proof);
}

uint64_t ResumeWindow(std::chrono::milliseconds peer_timeout) {
  return 2 * MaxRedialTries(peer_timeout);
}

}  // namespace ps::xfer::internal
