#include "core/auth.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace ps::xfer {
namespace {

// sodium_init is thread-safe and idempotent; it must run before any other
// libsodium call (it seeds the random generator).
void EnsureSodium() { [[maybe_unused]] static const int once = sodium_init(); }

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
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return ErrnoStatus(StatusCode::kInvalidArgument,
                       "cluster secret file " + path, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("cluster secret file " + path +
                           " is not a regular file");
  }
  if ((st.st_mode & (S_IRWXO)) != 0) {
    return InvalidArgument("cluster secret file " + path +
                           " is accessible by other users; chmod 600 it");
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return InvalidArgument("cannot read cluster secret file " + path);
  }
  if (!bytes.empty() && bytes.back() == '\n') bytes.pop_back();
  auto secret = FromBytes(std::move(bytes));
  if (!secret.ok()) return secret.status().WithContext(path);
  return secret;
}

StatusOr<ClusterSecret> ClusterSecret::Resolve(const std::string& file) {
  if (!file.empty()) return FromFile(file);
  if (const char* env = std::getenv("PS_CLUSTER_SECRET_FILE");
      env != nullptr && env[0] != '\0') {
    auto secret = FromFile(env);
    if (!secret.ok()) {
      return secret.status().WithContext("$PS_CLUSTER_SECRET_FILE");
    }
    return secret;
  }
  if (const char* env = std::getenv("PS_CLUSTER_SECRET");
      env != nullptr && env[0] != '\0') {
    auto secret = FromBytes(env);
    if (!secret.ok()) return secret.status().WithContext("$PS_CLUSTER_SECRET");
    return secret;
  }
  return ClusterSecret();
}

std::string ClusterSecret::Prove(std::string_view protocol, AuthRole role,
                                 std::string_view acceptor_nonce,
                                 std::string_view connector_nonce) const {
  EnsureSodium();
  std::string proof(kProofBytes, '\0');
  if (key_ == nullptr) return proof;
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(
      &state, reinterpret_cast<const unsigned char*>(key_->data()),
      key_->size());
  auto update = [&state](std::string_view part) {
    // Length-prefixed, so that no two different inputs concatenate alike.
    const uint32_t n = htonl(static_cast<uint32_t>(part.size()));
    crypto_auth_hmacsha256_update(
        &state, reinterpret_cast<const unsigned char*>(&n), sizeof(n));
    crypto_auth_hmacsha256_update(
        &state, reinterpret_cast<const unsigned char*>(part.data()),
        part.size());
  };
  const char r = static_cast<char>(role);
  update(protocol);
  update(std::string_view(&r, 1));
  update(acceptor_nonce);
  update(connector_nonce);
  crypto_auth_hmacsha256_final(&state,
                               reinterpret_cast<unsigned char*>(proof.data()));
  return proof;
}

bool ClusterSecret::Verify(std::string_view protocol, AuthRole role,
                           std::string_view acceptor_nonce,
                           std::string_view connector_nonce,
                           std::string_view proof) const {
  if (key_ == nullptr || proof.size() != kProofBytes) return false;
  const std::string want =
      Prove(protocol, role, acceptor_nonce, connector_nonce);
  return sodium_memcmp(want.data(), proof.data(), kProofBytes) == 0;
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
