#include "bench/peak_rss.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace ps::bench {
namespace {

// The number after "field:" on its line of the /proc file `path`.
StatusOr<uint64_t> ProcField(const std::string& path,
                             const std::string& field) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path + " (is the process alive?)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(field.size() + 1));
    uint64_t value = 0;
    if (fields >> value) return value;
    break;
  }
  return Corruption(path + " has no readable " + field + " line");
}

}  // namespace

StatusOr<uint64_t> PeakRssKib(pid_t pid) {
  return ProcField(pid == 0 ? "/proc/self/status"
                            : "/proc/" + std::to_string(pid) + "/status",
                   "VmHWM");
}

StatusOr<uint64_t> RssKib(pid_t pid) {
  return ProcField(pid == 0 ? "/proc/self/status"
                            : "/proc/" + std::to_string(pid) + "/status",
                   "VmRSS");
}

StatusOr<uint64_t> StorageReadBytes(pid_t pid) {
  return ProcField("/proc/" + std::to_string(pid) + "/io", "read_bytes");
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
