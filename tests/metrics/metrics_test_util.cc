#include "tests/metrics/metrics_test_util.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace ps::testing {

StatusOr<std::string> MetricsAddressFromLog(const std::string& log_path,
                                            int timeout_ms) {
  const std::string marker = "metrics: http://";
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    std::ifstream in(log_path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string log = ss.str();
    const size_t at = log.find(marker);
    if (at != std::string::npos) {
      const size_t start = at + marker.size();
      const size_t end = log.find("/metrics", start);
      if (end != std::string::npos) return log.substr(start, end - start);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Timeout("no metrics address in " + log_path + " after " +
                     std::to_string(timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

StatusOr<std::string> HttpGet(const std::string& address,
                              const std::string& path, int timeout_ms) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("not host:port: " + address);
  }
  httplib::Client client(address.substr(0, colon),
                         std::stoi(address.substr(colon + 1)));
  const time_t sec = timeout_ms / 1000;
  const time_t usec = (timeout_ms % 1000) * 1000;
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  auto res = client.Get(path.c_str());
  if (!res) {
    return NetworkError("GET http://" + address + path + ": " +
                        httplib::to_string(res.error()));
  }
  if (res->status != 200) {
    return NotFound("GET http://" + address + path + ": status " +
                    std::to_string(res->status) + ": " + res->body);
  }
  return res->body;
}

std::optional<double> SampleValue(const std::string& text,
                                  const std::string& series) {
  const std::string line_start = series + " ";
  size_t at = 0;
  while ((at = text.find(line_start, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      const size_t end = text.find('\n', at);
      return std::stod(
          text.substr(at + line_start.size(), end - at - line_start.size()));
    }
    ++at;
  }
  return std::nullopt;
}

StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return ErrnoStatus(StatusCode::kNetwork, "socket", errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(StatusCode::kNetwork, "bind 127.0.0.1:0", err);
  }
  close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

}  // namespace ps::testing
