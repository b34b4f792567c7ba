#include "core/auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/context_environment.h"
#include "net/unique_fd.h"

namespace ps::xfer {
namespace {

// sodium_init is thread-safe and idempotent; it must run before any other
// libsodium call (it seeds the random generator).
void EnsureSodium() { [[maybe_unused]] static const int once = sodium_init(); }

// Overwrites the value of every PS_CLUSTER_SECRET entry of `envp` with NUL
// bytes (there may be more than one: execve takes duplicates). The entries
// a process starts with point into the block the kernel shows under
// /proc/PID, so this wipes them there too.
void WipeSecretFromEnvironment(char** envp) {
  static constexpr std::string_view kEntry = "PS_CLUSTER_SECRET=";
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, kEntry.data(), kEntry.size()) != 0) continue;
    char* value = *e + kEntry.size();
    sodium_memzero(value, std::strlen(value));
  }
}

}  // namespace

ClusterSecret::ClusterSecret(const std::string& bytes)
    : key_(std::make_shared<const std::string>(bytes)) {}

StatusOr<ClusterSecret> ClusterSecret::FromBytes(std::string bytes) {
  if (bytes.size() < kMinSecretBytes) {
    std::string why = "the cluster secret is too short (";
    why.append(std::to_string(bytes.size()));
    why.append(" bytes; at least ");
    why.append(std::to_string(kMinSecretBytes));
    why.append(")");
    return InvalidArgument(std::move(why));
  }
  return ClusterSecret(bytes);
}

StatusOr<ClusterSecret> ClusterSecret::FromFile(const std::string& path) {
  const std::string what = "cluster secret file " + path;
  // Open first, then check and read the descriptor: checking the path and
  // opening it after would check one file and read another if the path
  // changed in between. O_NONBLOCK: opening a FIFO would otherwise wait for
  // a writer.
  net::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    return ErrnoStatus(StatusCode::kInvalidArgument, what, errno);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return ErrnoStatus(StatusCode::kInvalidArgument, what, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(what +
                           " is not a regular file (a folder, FIFO or "
                           "device?); give a file holding the secret");
  }
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return InvalidArgument(
        what + " belongs to uid " + std::to_string(st.st_uid) +
        ", neither this user (uid " + std::to_string(me) +
        ") nor root, so that user could change it; chown it to this user");
  }
  if ((st.st_mode & (S_IWGRP | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o",
                  static_cast<unsigned>(st.st_mode & 07777));
    return InvalidArgument(
        what + " has mode " + mode +
        ", which lets its group write it or other users use it; chmod 600 "
        "it (group read, 0640 or 0440, is allowed)");
  }
  std::string bytes;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      bytes.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      sodium_memzero(buffer, sizeof(buffer));
      return ErrnoStatus(StatusCode::kInvalidArgument, "reading " + what, err);
    }
  }
  sodium_memzero(buffer, sizeof(buffer));
  if (!bytes.empty() && bytes.back() == '\n') bytes.pop_back();
  auto secret = FromBytes(std::move(bytes));
  if (!secret.ok()) return secret.status().WithContext(path);
  secret->file_ = path;
  return secret;
}

StatusOr<ClusterSecret> ClusterSecret::Resolve(const std::string& file,
                                               const char* const* envp) {
  if (!file.empty()) return FromFile(file);
  if (auto env = EnvValue(envp, "PS_CLUSTER_SECRET_FILE");
      env.has_value() && !env->empty()) {
    auto secret = FromFile(std::string(*env));
    if (!secret.ok()) {
      return secret.status().WithContext("$PS_CLUSTER_SECRET_FILE");
    }
    return secret;
  }
  if (auto env = EnvValue(envp, "PS_CLUSTER_SECRET");
      env.has_value() && !env->empty()) {
    auto secret = FromBytes(std::string(*env));
    if (!secret.ok()) return secret.status().WithContext("$PS_CLUSTER_SECRET");
    return secret;
  }
  return ClusterSecret();
}

StatusOr<ClusterSecret> ClusterSecret::ResolveForProgram(
    const std::string& file, char** envp) {
  auto secret = Resolve(file, envp);
  WipeSecretFromEnvironment(envp);
  // A secret handed down in an inherited descriptor (ps_launch's memfd) is
  // read now: whatever this program execs does not inherit it further.
  constexpr std::string_view kInherited = "/proc/self/fd/";
  if (secret.ok() && secret->file().starts_with(kInherited)) {
    const int fd = std::atoi(secret->file().c_str() + kInherited.size());
    if (fd > STDERR_FILENO) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  return secret;
}

std::string ClusterSecret::Prove(std::string_view protocol, AuthRole role,
                                 std::string_view acceptor_nonce,
                                 std::string_view connector_nonce) const {
  if (key_ == nullptr) return std::string(kProofBytes, '\0');
  const char r = static_cast<char>(role);
  return AuthCode(*key_, {protocol, std::string_view(&r, 1), acceptor_nonce,
                          connector_nonce});
}

bool ClusterSecret::Verify(std::string_view protocol, AuthRole role,
                           std::string_view acceptor_nonce,
                           std::string_view connector_nonce,
                           std::string_view proof) const {
  if (key_ == nullptr) return false;
  const char r = static_cast<char>(role);
  return VerifyAuthCode(
      *key_,
      {protocol, std::string_view(&r, 1), acceptor_nonce, connector_nonce},
      proof);
}

std::string AuthCode(std::string_view key,
                     std::initializer_list<std::string_view> parts) {
  EnsureSodium();
  static_assert(kProofBytes == crypto_auth_hmacsha256_BYTES);
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(
      &state, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  for (std::string_view part : parts) {
    // Length-prefixed, so that no two different lists concatenate alike.
    const uint32_t n = htonl(static_cast<uint32_t>(part.size()));
    crypto_auth_hmacsha256_update(
        &state, reinterpret_cast<const unsigned char*>(&n), sizeof(n));
    crypto_auth_hmacsha256_update(
        &state, reinterpret_cast<const unsigned char*>(part.data()),
        part.size());
  }
  std::string code(kProofBytes, '\0');
  crypto_auth_hmacsha256_final(&state,
                               reinterpret_cast<unsigned char*>(code.data()));
  return code;
}

bool VerifyAuthCode(std::string_view key,
                    std::initializer_list<std::string_view> parts,
                    std::string_view code) {
  if (code.size() != kProofBytes) return false;
  const std::string want = AuthCode(key, parts);
  return sodium_memcmp(want.data(), code.data(), kProofBytes) == 0;
}

std::string NewNonce() {
  EnsureSodium();
  std::string nonce(kNonceBytes, '\0');
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  if (inet_pton(AF_INET6, bare.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

Status RequireSecretFor(const std::string& host, const ClusterSecret& secret,
                        std::string_view what) {
  if (!secret.empty() || IsLoopbackHost(host)) return Status::OK();
  return InvalidArgument(
      std::string(what) + " binds " + host +
      ", which other machines can reach, but no cluster secret is set: give "
      "every process the same key file (--cluster_secret_file, or "
      "$PS_CLUSTER_SECRET_FILE), or bind 127.0.0.1");
}

}  // namespace ps::xfer
