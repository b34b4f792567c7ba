// ClusterSecret: the key every process of one cluster holds, and the
// challenge-response that proves a peer holds it too.
//
// Each side of a new connection sends a fresh random nonce; each proves it
// holds the secret with HMAC-SHA256(secret, protocol | role | acceptor nonce |
// connector nonce). The secret itself never travels, and a recorded proof is
// worthless on any other connection (the other side's nonce differs). Used by
// the xfer hello (core/context.cc) and the control channel
// (protocol/control_channel.h): nothing, not even a region descriptor, is
// given to a peer before its proof checked out.
//
// What it does not do: the traffic after the handshake is neither encrypted
// nor signed. The secret keeps strangers out of the cluster; it is no defence
// against someone who can rewrite packets on the path.
//
// Where the secret comes from (Resolve): a key file (--cluster_secret_file),
// else the file named by $PS_CLUSTER_SECRET_FILE, else $PS_CLUSTER_SECRET
// itself. No secret: connections are not authenticated, which is allowed
// only for listeners on loopback addresses (RequireSecretFor).
//
// Thread-safe: immutable after construction; copies share the key.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::xfer {

// Bytes of a nonce and of a proof.
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;
// A shorter secret is refused: it could be guessed.
inline constexpr size_t kMinSecretBytes = 16;

enum class AuthRole : unsigned char {
  kAcceptor = 1,   // the side that accepted the connection
  kConnector = 2,  // the side that connected
};

class ClusterSecret {
 public:
  ClusterSecret() = default;  // no secret: nothing is authenticated

  // The secret's bytes (at least kMinSecretBytes).
  static StatusOr<ClusterSecret> FromBytes(std::string bytes);
  // The content of `path`, one trailing newline dropped. Refused when the
  // file is readable or writable by others (chmod 600 it).
  static StatusOr<ClusterSecret> FromFile(const std::string& path);
  // `file` when non-empty, else $PS_CLUSTER_SECRET_FILE, else
  // $PS_CLUSTER_SECRET, else no secret.
  static StatusOr<ClusterSecret> Resolve(const std::string& file);

  bool empty() const { return key_ == nullptr; }

  // The proof `role` sends on a connection of `protocol` ("xfer",
  // "control") with these nonces.
  std::string Prove(std::string_view protocol, AuthRole role,
                    std::string_view acceptor_nonce,
                    std::string_view connector_nonce) const;
  // Whether `proof` is what Prove gives (in constant time).
  bool Verify(std::string_view protocol, AuthRole role,
              std::string_view acceptor_nonce, std::string_view connector_nonce,
              std::string_view proof) const;

 private:
  explicit ClusterSecret(const std::string& bytes);
  std::shared_ptr<const std::string> key_;
};

// kNonceBytes fresh random bytes.
std::string NewNonce();

// Whether `host` (a listen address) is reachable from this machine only:
// 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackHost(const std::string& host);

// kInvalidArgument when a listener bound to `host` has no secret: a cluster
// that leaves loopback must authenticate its peers. `what` names the
// listener in the message ("ps_server control port").
Status RequireSecretFor(const std::string& host, const ClusterSecret& secret,
                        std::string_view what);

}  // namespace ps::xfer
