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
// itself, read from the environment block the caller passes (a program's
// main() passes its own; library code never reads the environment). No
// secret: connections are not authenticated, which is allowed only for
// listeners on loopback addresses (RequireSecretFor). A program's
// main() resolves with ResolveForProgram, which also wipes the value of
// $PS_CLUSTER_SECRET from the process's environment: /proc/PID shows the
// environment to anyone who can read that file, for as long as the
// process runs.
//
// Thread-safe: immutable after construction; copies share the key.
// ResolveForProgram is the exception: it writes to the environment (see
// there).
#pragma once

#include <cstddef>
#include <initializer_list>
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
  // The content of `path`, one trailing newline dropped. The file is opened
  // first and the open descriptor checked (fstat) and read, so what is
  // checked is what is read, even if the path changes meanwhile. Symlinks
  // are followed on purpose: Kubernetes mounts a Secret's keys as symlinks.
  // Refused (kInvalidArgument, the message says the fix):
  //   - anything but a regular file (opened non-blocking, so a FIFO cannot
  //     hang the caller);
  //   - a file owned by neither this process's effective user nor root
  //     (its owner could change it; root can read everything anyway, and a
  //     Kubernetes Secret volume's files belong to root);
  //   - any group-write bit or any bit for other users (chmod 600).
  // Group read is allowed on purpose: Kubernetes mounts a Secret with
  // defaultMode 0440 (or 0640), owned by root and the pod's fsGroup.
  static StatusOr<ClusterSecret> FromFile(const std::string& path);
  // `file` when non-empty, else $PS_CLUSTER_SECRET_FILE, else
  // $PS_CLUSTER_SECRET, else no secret; the variables as `envp` holds them
  // ("NAME=value" entries up to a null pointer; null: none). No side
  // effects: an entry point of a library (the Python package) calls it and
  // leaves its user's environment as it was.
  static StatusOr<ClusterSecret> Resolve(const std::string& file,
                                         const char* const* envp);
  // For a program's main(), with its environment block: Resolve(file, envp),
  // then overwrites the value of every PS_CLUSTER_SECRET entry of envp with NUL
  // bytes, in place, whichever source the secret came from and also when
  // resolving failed. In place because /proc/PID shows the environment block
  // the kernel wrote at exec, which is where those entries point:
  // unsetenv() would only drop the pointer and leave the bytes there.
  // A secret read from an inherited descriptor (/proc/self/fd/N, as
  // ps_launch hands it on) gets that descriptor closed on exec.
  // Afterwards $PS_CLUSTER_SECRET reads as empty (no secret), so a program
  // that needs the secret twice passes this result on instead of resolving
  // again. Call it before the program starts any thread: it writes to the
  // environment, which no other thread may read or change meanwhile.
  static StatusOr<ClusterSecret> ResolveForProgram(const std::string& file,
                                                   char** envp);

  bool empty() const { return key_ == nullptr; }
  // The secret itself ("" when none), for a launcher that hands it on to
  // the processes it starts (ps_launch). Never log it.
  std::string_view bytes() const {
    return key_ == nullptr ? std::string_view() : std::string_view(*key_);
  }
  // The path FromFile read it from, as given (also through Resolve); ""
  // when it came from bytes ($PS_CLUSTER_SECRET) or there is none.
  const std::string& file() const { return file_; }

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
  std::string file_;
};

// kNonceBytes fresh random bytes.
std::string NewNonce();

// HMAC-SHA256 keyed by `key` over `parts`, each prefixed by its length (so
// that no two different lists concatenate alike): kProofBytes, the one
// construction behind every proof (ClusterSecret::Prove, a tcp session's
// resume proof, core/stream/session_resume.h).
std::string AuthCode(std::string_view key,
                     std::initializer_list<std::string_view> parts);
// Whether `code` is AuthCode(key, parts), compared in constant time.
bool VerifyAuthCode(std::string_view key,
                    std::initializer_list<std::string_view> parts,
                    std::string_view code);

// Whether `host` (a listen address) is reachable from this machine only:
// 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackHost(const std::string& host);

// kInvalidArgument when a listener bound to `host` has no secret: a cluster
// that leaves loopback must authenticate its peers. `what` names the
// listener in the message ("ps_server control port").
Status RequireSecretFor(const std::string& host, const ClusterSecret& secret,
                        std::string_view what);

}  // namespace ps::xfer
