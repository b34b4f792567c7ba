// Process harness for multi-process tests: runs a function in a forked child
// that talks to the parent through a pair of pipes, one text line at a time
// (addresses, descriptors as hex). A ChildProcess owns its child: when the
// object dies (also when a test assertion returns early) the child is killed
// with SIGKILL and reaped, and a child whose parent dies is killed by the
// kernel (PR_SET_PDEATHSIG), so no test ever leaves a process behind.
//
// Fork only from a process without threads (start children before creating
// the parent's Context): the child inherits only the forking thread, and
// sanitizers and glibc are only well-defined in that case.
//
//   ChildProcess target = ChildProcess::Start("target", [](LineChannel& ch) {
//     auto ctx = Context::Create({...}).value();
//     ch.Send("ready " + ctx->address());
//     return ch.Receive(30000) == "exit" ? 0 : 1;
//   });
//   std::optional<std::string> line = target.channel().Receive(10000);
//   ...
//   EXPECT_EQ(target.Wait(10000), 0);
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ps::testing {

// One end of a bidirectional line channel (a pair of pipes).
class LineChannel {
 public:
  LineChannel() = default;
  LineChannel(int read_fd, int write_fd);
  ~LineChannel();
  LineChannel(LineChannel&& other) noexcept;
  LineChannel& operator=(LineChannel&& other) noexcept;
  LineChannel(const LineChannel&) = delete;
  LineChannel& operator=(const LineChannel&) = delete;

  // Sends `line` (without '\n'; it must not contain one). False if the other
  // side is gone.
  bool Send(std::string_view line);
  // The next line, or nullopt on timeout or when the other side closed.
  std::optional<std::string> Receive(int timeout_ms);

 private:
  void Close();
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::string buffer_;  // bytes read past the last returned line
};

class ChildProcess {
 public:
  // The child's body; its return value is the child's exit code.
  using Body = std::function<int(LineChannel&)>;

  // Forks a child that runs `body` and exits. `name` labels the child's
  // diagnostics. Aborts the test binary if fork() fails (the machine is
  // broken, nothing to test).
  static ChildProcess Start(std::string name, Body body);

  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  LineChannel& channel() { return channel_; }
  bool running() const { return pid_ > 0; }

  // Waits for the child to exit. Returns its exit code, 128 + signal number
  // if a signal ended it, or nullopt on timeout (the child keeps running).
  std::optional<int> Wait(int timeout_ms);
  // SIGKILL and reap. No-op if the child already exited.
  void Kill();

 private:
  pid_t pid_ = -1;
  std::string name_;
  LineChannel channel_;
};

// Nanoseconds on CLOCK_MONOTONIC, which all processes of a host share.
int64_t MonotonicNanos();

// Binary <-> lowercase hex, for descriptors in text lines.
std::string HexEncode(std::string_view bytes);
// nullopt if `hex` has an odd length or a non-hex character.
std::optional<std::string> HexDecode(std::string_view hex);

// Splits on single spaces.
std::vector<std::string> SplitWords(std::string_view line);

// For child bodies (gtest assertions do not reach the parent from a child):
// prints where and why, then returns `code` from the enclosing body.
#define PS_CHILD_CHECK(cond, ...)                                            \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "[child %d] %s:%d: check failed: %s\n",           \
                   static_cast<int>(::getpid()), __FILE__, __LINE__, #cond); \
      __VA_OPT__(                                                            \
          std::fprintf(stderr, "  %s\n", std::string(__VA_ARGS__).c_str());) \
      std::fflush(stderr);                                                   \
      return 1;                                                              \
    }                                                                        \
  } while (0)

}  // namespace ps::testing
