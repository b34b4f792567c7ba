#include "launch/server_ready.h"

#include <signal.h>
#include <unistd.h>

#include <cctype>

#include "launch/text_file.h"

namespace ps::launch {

std::optional<std::string> ParseAddress(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.pop_back();
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return std::nullopt;
  long port = 0;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    port = port * 10 + (text[i] - '0');
    if (port > 65535) return std::nullopt;
  }
  if (port == 0) return std::nullopt;
  return text;
}

StatusOr<std::string> AwaitAddress(Process& process,
                                   const std::string& port_file,
                                   int64_t timeout_ms, int stop_timeout_ms,
                                   const std::function<bool()>& cancelled) {
  const int64_t deadline = MonotonicMillis() + timeout_ms;
  std::string last_seen;
  for (;;) {
    if (auto code = process.Exited()) {
      return Internal(process.name() + " exited with code " +
                      std::to_string(*code) +
                      " before publishing its address; log:\n" +
                      FileTail(process.log_path(), 4000));
    }
    if (process.pid() <= 0) return Internal(process.name() + " is not running");
    if (auto text = ReadWholeFile(port_file)) {
      if (auto addr = ParseAddress(*text)) {
        if (*addr == last_seen) return *addr;
        last_seen = *addr;
      }
    }
    if (cancelled && cancelled()) {
      return Cancelled("stopped while waiting for " + process.name());
    }
    if (MonotonicMillis() > deadline) {
      std::string tail = FileTail(process.log_path(), 4000);
      (void)process.Stop(SIGTERM, stop_timeout_ms);
      return Timeout(process.name() + " did not write " + port_file +
                     " in time; log:\n" + tail);
    }
    usleep(20000);
  }
}

}  // namespace ps::launch
