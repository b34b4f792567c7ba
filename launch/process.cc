#include "launch/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

extern char** environ;

namespace ps::launch {
namespace {

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

// Reaps `pid` if it exited; the exit code, or nullopt while it runs.
std::optional<int> TryReap(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid) return DecodeWaitStatus(status);
  if (r < 0) return 255;  // not our child any more: nothing to wait for
  return std::nullopt;
}

// argv[0] as exec will find it: a path is taken as is, a bare name is looked
// up in $PATH here, before the fork (the child may only call async-signal-
// safe functions).
StatusOr<std::string> ResolveProgram(const std::string& program) {
  if (program.empty()) return InvalidArgument("empty program name");
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string full = (dir.empty() ? "." : dir) + "/" + program;
    if (access(full.c_str(), X_OK) == 0) return full;
    start = end + 1;
  }
  return NotFound("no program '" + program + "' in $PATH");
}

// The inherited environment with `changes` applied ("NAME=v" sets, "NAME"
// removes).
std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& changes) {
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    bool replaced = false;
    for (const auto& c : changes) replaced |= name_of(c) == name_of(entry);
    if (!replaced) env.push_back(std::move(entry));
  }
  for (const auto& c : changes) {
    if (c.find('=') != std::string::npos) env.push_back(c);
  }
  return env;
}

}  // namespace

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGKILL:
      return "SIGKILL";
    default:
      return "signal " + std::to_string(sig);
  }
}

int64_t MonotonicMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

StatusOr<std::unique_ptr<Process>> Process::Spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument(spec.name + ": no command");
  // Everything the child needs is built here: after fork it only calls
  // async-signal-safe functions.
  PS_ASSIGN_OR_RETURN(std::string program, ResolveProgram(spec.argv[0]));
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = ChildEnvironment(spec.env);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string exec_failed = "exec of " + program + " failed\n";

  int log_fd = open(spec.log_path.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return ErrnoStatus(StatusCode::kIOError, "open " + spec.log_path, errno);
  }
  std::fflush(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(log_fd);
    return ErrnoStatus(StatusCode::kInternal, "fork", err);
  }
  if (pid == 0) {
    if (spec.new_session) {
      setsid();
    } else if (spec.own_process_group) {
      setpgid(0, 0);
    }
    if (spec.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(97);
    }
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execve(program.c_str(), argv.data(), envp.data());
    ssize_t ignored =
        write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)ignored;
    _exit(127);
  }
  close(log_fd);
  // Set the group from this side too: a signal sent before the child ran
  // setpgid must still reach the group.
  if (spec.own_process_group && !spec.new_session) setpgid(pid, pid);

  std::unique_ptr<Process> p(new Process());
  p->pid_ = pid;
  p->own_group_ = spec.own_process_group || spec.new_session;
  p->name_ = spec.name;
  p->log_path_ = spec.log_path;
  return p;
}

std::optional<int> Process::Exited() {
  if (result_) {
    return result_->ok() ? std::optional<int>(**result_) : std::nullopt;
  }
  if (pid_ <= 0) return std::nullopt;
  if (auto code = TryReap(pid_)) {
    pid_ = -1;
    result_ = StatusOr<int>(*code);
    return *code;
  }
  return std::nullopt;
}

void Process::Signal(int sig) {
  if (pid_ <= 0) return;
  // A group leader's group holds what a command prefix forked; a process
  // that moved to another group is still signalled itself.
  if (own_group_ && getpgid(pid_) == pid_) {
    kill(-pid_, sig);
  } else {
    kill(pid_, sig);
  }
}

std::optional<int> Process::WaitExit(int timeout_ms) {
  const int64_t deadline = MonotonicMillis() + timeout_ms;
  for (;;) {
    if (auto code = Exited()) return code;
    if (pid_ <= 0 || MonotonicMillis() > deadline) return std::nullopt;
    usleep(5000);
  }
}

StatusOr<int> Process::Stop(int sig, int timeout_ms) {
  if (result_) return *result_;
  if (pid_ <= 0) return Internal(name_ + " was never started");
  Signal(sig);
  if (auto code = WaitExit(timeout_ms)) return *code;
  if (result_) return *result_;
  Signal(SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  result_ = StatusOr<int>(Timeout(name_ + " (pid " + std::to_string(pid_) +
                                  ") ignored " + SignalName(sig) + " for " +
                                  std::to_string(timeout_ms) + " ms; killed"));
  pid_ = -1;
  return *result_;
}

Process::~Process() {
  if (pid_ > 0) (void)Stop(SIGTERM, 10000);
}

}  // namespace ps::launch
