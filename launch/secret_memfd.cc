#include "launch/secret_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace ps::launch {

StatusOr<SecretMemfd> SecretMemfd::Create(std::string_view secret) {
  // Without MFD_CLOEXEC: the children are to inherit it.
  net::UniqueFd fd(memfd_create("ps-cluster-secret", MFD_ALLOW_SEALING));
  if (!fd.valid()) {
    return ErrnoStatus(StatusCode::kResourceExhausted,
                       "memfd_create for the cluster secret", errno);
  }
  // A child points its stdin, stdout and stderr elsewhere before exec: a
  // descriptor there (a launcher started with one of them closed) would be
  // replaced.
  if (fd.get() <= STDERR_FILENO) {
    net::UniqueFd moved(fcntl(fd.get(), F_DUPFD, STDERR_FILENO + 1));
    if (!moved.valid()) {
      return ErrnoStatus(StatusCode::kResourceExhausted,
                         "moving the cluster secret's memfd above stderr",
                         errno);
    }
    fd = std::move(moved);
  }
  // A memfd starts out 0777 on older kernels; FromFile wants no bits for
  // other users.
  if (fchmod(fd.get(), 0600) != 0) {
    return ErrnoStatus(StatusCode::kInternal,
                       "chmod 600 of the cluster secret's memfd", errno);
  }
  size_t done = 0;
  while (done < secret.size()) {
    const ssize_t n =
        write(fd.get(), secret.data() + done, secret.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return ErrnoStatus(StatusCode::kResourceExhausted,
                         "writing the cluster secret into its memfd", errno);
    }
    done += static_cast<size_t>(n);
  }
  // No child may change what the others read.
  if (fcntl(fd.get(), F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return ErrnoStatus(StatusCode::kNotSupported,
                       "sealing the cluster secret's memfd", errno);
  }
  SecretMemfd m;
  m.fd_ = std::move(fd);
  return m;
}

}  // namespace ps::launch
