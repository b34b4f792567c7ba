#include "core/internal/cpu_latency_request.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace ps::xfer::internal {

StatusOr<std::unique_ptr<CpuLatencyRequest>> CpuLatencyRequest::Hold(
    int max_us, const std::string& path) {
  if (max_us < 0) {
    return InvalidArgument("cpu_wakeup_latency_us is " +
                           std::to_string(max_us) +
                           "; a bound in microseconds is 0 or more");
  }
  net::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    return NotSupported(
        "cannot ask for CPU wake-ups within " + std::to_string(max_us) +
        " us: open " + path + ": " + std::strerror(err) +
        (err == EACCES || err == EPERM ? " (writing it needs root)" : ""));
  }
  // The kernel takes the bound as a binary s32.
  const int32_t value = max_us;
  if (::write(fd.get(), &value, sizeof value) !=
      static_cast<ssize_t>(sizeof value)) {
    const int err = errno;
    return NotSupported("cannot ask for CPU wake-ups within " +
                        std::to_string(max_us) + " us: write " + path + ": " +
                        std::strerror(err));
  }
  return std::unique_ptr<CpuLatencyRequest>(
      new CpuLatencyRequest(std::move(fd), max_us));
}

}  // namespace ps::xfer::internal
