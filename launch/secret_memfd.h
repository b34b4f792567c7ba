// SecretMemfd: the cluster secret in a sealed memfd that the processes
// ps_launch starts inherit, so that ps_launch can hand a secret it got as
// $PS_CLUSTER_SECRET on without putting it in their environments (every
// process's /proc/PID/environ shows its environment; a descriptor's content
// is for its owner and root only).
//
// The memfd is not close-on-exec: every child, and whatever a command
// prefix execs, holds it at the same number, and reads it by path(),
// "/proc/self/fd/N", given as its $PS_CLUSTER_SECRET_FILE. It is mode 0600
// (what ClusterSecret::FromFile demands) and sealed against any change in
// content or size. A prefix that closes inherited descriptors (sudo) or
// leaves the host (ssh) does not pass it on: those need a key file.
//
// Thread-safety: a value; create it before starting children, in a process
// that forks from one thread (it is inherited by every child forked while
// it lives, which is the point).
#pragma once

#include <string>
#include <string_view>

#include "base/status_or.h"
#include "net/unique_fd.h"

namespace ps::launch {

class SecretMemfd {
 public:
  // A memfd holding exactly `secret`. kResourceExhausted when no memfd can
  // be had, kNotSupported when the kernel cannot seal it.
  static StatusOr<SecretMemfd> Create(std::string_view secret);

  int fd() const { return fd_.get(); }
  // "/proc/self/fd/N": the secret's path in this process and its children.
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd()); }

 private:
  net::UniqueFd fd_;
};

}  // namespace ps::launch
