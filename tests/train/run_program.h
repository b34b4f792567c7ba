// RunProgram: runs one of the project's binaries to its end with its
// output in a file, for the tests of tests/train that check what the
// programs print and how they exit (program_exit_codes_test.cc,
// early_stop_process_test.cc).
//
// Thread-safety: call from one test thread; the child is killed with the
// test process (PR_SET_PDEATHSIG).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/ps/server_process.h"

namespace ps::testing {

struct Outcome {
  int code = -1;  // the exit status, 128 + signal; -1: killed at the timeout
  std::string output;
  double seconds = 0;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string Joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += a + " ";
  return out;
}

// Runs argv to its end, stdout and stderr into `log`; SIGKILL after
// timeout_s (times SlowdownFactor) and code -1 when it runs that long.
inline Outcome RunProgram(const std::vector<std::string>& argv,
                          const std::string& log, int timeout_s = 20) {
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.data()));
  args.push_back(nullptr);
  const int fd =
      open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(97);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    dup2(devnull, STDIN_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fd);
  close(devnull);
  Outcome out;
  const auto deadline =
      start + std::chrono::seconds(timeout_s * SlowdownFactor());
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      out.code =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (r < 0 || Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out.output = ReadFile(log);
  return out;
}

}  // namespace ps::testing
