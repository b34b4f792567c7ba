#include "net/unique_fd.h"

#include <unistd.h>

namespace ps::net {

Deadline DeadlineIn(int64_t ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}

void UniqueFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace ps::net
