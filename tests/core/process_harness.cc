#include "tests/core/process_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

namespace ps::testing {

LineChannel::LineChannel(int read_fd, int write_fd)
    : read_fd_(read_fd), write_fd_(write_fd) {}

LineChannel::~LineChannel() { Close(); }

LineChannel::LineChannel(LineChannel&& other) noexcept
    : read_fd_(std::exchange(other.read_fd_, -1)),
      write_fd_(std::exchange(other.write_fd_, -1)),
      buffer_(std::move(other.buffer_)) {}

LineChannel& LineChannel::operator=(LineChannel&& other) noexcept {
  if (this != &other) {
    Close();
    read_fd_ = std::exchange(other.read_fd_, -1);
    write_fd_ = std::exchange(other.write_fd_, -1);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

void LineChannel::Close() {
  if (read_fd_ >= 0) close(read_fd_);
  if (write_fd_ >= 0) close(write_fd_);
  read_fd_ = write_fd_ = -1;
}

bool LineChannel::Send(std::string_view line) {
  if (write_fd_ < 0) return false;
  std::string out(line);
  out.push_back('\n');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = write(write_fd_, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> LineChannel::Receive(int timeout_ms) {
  if (read_fd_ < 0) return std::nullopt;
  const int64_t deadline = MonotonicNanos() + int64_t{timeout_ms} * 1000000;
  for (;;) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    int64_t left_ms = (deadline - MonotonicNanos()) / 1000000;
    if (left_ms <= 0) return std::nullopt;
    pollfd pfd{read_fd_, POLLIN, 0};
    int ready = poll(&pfd, 1, static_cast<int>(left_ms));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    ssize_t n = read(read_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;  // closed: the other side exited
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

ChildProcess ChildProcess::Start(std::string name, Body body) {
  int to_child[2];
  int to_parent[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(to_parent, O_CLOEXEC) != 0) {
    std::perror("process_harness: pipe2");
    std::abort();
  }
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("process_harness: fork");
    std::abort();
  }
  if (pid == 0) {
    // Die with the parent, even if it is killed before it can reap us.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(97);
    close(to_child[1]);
    close(to_parent[0]);
    int code = 98;
    {
      LineChannel channel(to_child[0], to_parent[1]);
      try {
        code = body(channel);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[child %s] exception: %s\n", name.c_str(),
                     e.what());
        std::fflush(stderr);
        _exit(99);
      }
    }
    if (code != 0) {
      std::fprintf(stderr, "[child %s] exits with %d\n", name.c_str(), code);
    }
    std::fflush(nullptr);
    // exit(), not _exit(): sanitizers report (and set the exit code) at exit.
    std::exit(code);
  }
  close(to_child[0]);
  close(to_parent[1]);
  ChildProcess child;
  child.pid_ = pid;
  child.name_ = std::move(name);
  child.channel_ = LineChannel(to_parent[0], to_child[1]);
  return child;
}

ChildProcess::~ChildProcess() { Kill(); }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      name_(std::move(other.name_)),
      channel_(std::move(other.channel_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    pid_ = std::exchange(other.pid_, -1);
    name_ = std::move(other.name_);
    channel_ = std::move(other.channel_);
  }
  return *this;
}

static int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

std::optional<int> ChildProcess::Wait(int timeout_ms) {
  if (pid_ <= 0) return std::nullopt;
  const int64_t deadline = MonotonicNanos() + int64_t{timeout_ms} * 1000000;
  int64_t sleep_us = 100;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return DecodeWaitStatus(status);
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;  // not our child any more: nothing to reap
      return std::nullopt;
    }
    if (MonotonicNanos() >= deadline) return std::nullopt;
    usleep(static_cast<useconds_t>(sleep_us));
    if (sleep_us < 10000) sleep_us *= 2;
  }
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexValue(hex[i]);
    int lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

std::vector<std::string> SplitWords(std::string_view line) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= line.size()) {
    size_t end = line.find(' ', start);
    if (end == std::string_view::npos) end = line.size();
    if (end > start) words.emplace_back(line.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

}  // namespace ps::testing
