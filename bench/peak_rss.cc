#include "bench/peak_rss.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace ps::bench {

StatusOr<uint64_t> PeakRssKib(pid_t pid) {
  const std::string path = pid == 0
                               ? "/proc/self/status"
                               : "/proc/" + std::to_string(pid) + "/status";
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path + " (is the process alive?)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    uint64_t kib = 0;
    if (fields >> kib) return kib;
    break;
  }
  return Corruption(path + " has no readable VmHWM line");
}

StatusOr<uint64_t> StorageReadBytes(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/io";
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path + " (is the process alive?)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("read_bytes:", 0) != 0) continue;
    std::istringstream fields(line.substr(11));
    uint64_t bytes = 0;
    if (fields >> bytes) return bytes;
    break;
  }
  return Corruption(path + " has no readable read_bytes line");
}

StatusOr<pid_t> ReadPidFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read pid file " + path);
  std::string text;
  std::getline(in, text);
  long pid = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, pid);
  if (ec != std::errc() || p != end || pid <= 0) {
    return InvalidArgument("pid file " + path + " does not hold a pid: '" +
                           text + "'");
  }
  return static_cast<pid_t>(pid);
}

}  // namespace ps::bench
