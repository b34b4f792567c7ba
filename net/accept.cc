#include "net/accept.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ps::net {

Accepted AcceptNonBlocking(int listen_fd) {
  Accepted a;
  for (;;) {
    const int fd =
        accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      a.result = AcceptResult::kAccepted;
      a.fd = UniqueFd(fd);
      return a;
    }
    a.error = errno;
    switch (a.error) {
      case EINTR:
      case ECONNABORTED:
        continue;
      case EAGAIN:
#if EWOULDBLOCK != EAGAIN
      case EWOULDBLOCK:
#endif
        a.result = AcceptResult::kNoneWaiting;
        return a;
      case EMFILE:
      case ENFILE:
      case ENOBUFS:
      case ENOMEM:
        a.result = AcceptResult::kOutOfDescriptors;
        return a;
      default:
        a.result = AcceptResult::kFailed;
        return a;
    }
  }
}

std::string OutOfDescriptorsText(int error) {
  std::string text = "out of file descriptors (accept: ";
  text += std::strerror(error);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    text += "; the process may open " + std::to_string(limit.rlim_cur) +
            ", ulimit -n";
  }
  text += ")";
  return text;
}

}  // namespace ps::net
