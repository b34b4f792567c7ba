#include "net/unique_fd.h"

#include <unistd.h>

#include <algorithm>

namespace ps::net {

Deadline DeadlineIn(int64_t ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}

int MsUntil(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 1, 1 << 30));
}

void UniqueFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace ps::net
