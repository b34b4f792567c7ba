// One child program started with fork + exec, owned by the object: the
// process handling that ps_launch and the multi-process tests share.
//
// Spawn() starts argv with its stdout and stderr appended to a log file and
// stdin on /dev/null; the child gets PR_SET_PDEATHSIG(SIGKILL) (unless it is
// meant to outlive us), so a parent that crashes takes it along. Stop() sends
// a signal, waits, and SIGKILLs it after a timeout; the destructor stops a
// process still running, so an early return never leaves one behind.
//
// Thread-safety: a Process is used by one thread at a time. Spawn forks, so
// call it where a fork is safe (the child only calls async-signal-safe
// functions before exec).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::launch {

struct ProcessSpec {
  // argv[0] is run as given when it holds a '/', else looked up in $PATH.
  std::vector<std::string> argv;
  // Written over the inherited environment: "NAME=value" sets NAME,
  // "NAME" alone removes it.
  std::vector<std::string> env;
  std::string log_path;         // stdout + stderr; truncated at start
  std::string name;             // "server-0": how messages name it
  bool die_with_parent = true;  // PR_SET_PDEATHSIG(SIGKILL)
  // The child leads a process group of its own, so a terminal's Ctrl-C
  // reaches only the launcher (which forwards it once) and a signal reaches
  // whatever a command prefix forks; new_session also leaves the terminal
  // (for processes meant to outlive the launcher).
  bool own_process_group = false;
  bool new_session = false;
};

class Process {
 public:
  static StatusOr<std::unique_ptr<Process>> Spawn(const ProcessSpec& spec);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  const std::string& name() const { return name_; }
  const std::string& log_path() const { return log_path_; }
  // -1 once the process was reaped.
  pid_t pid() const { return pid_; }

  // Its exit code once it exited (reaps it; 128 + signal when a signal ended
  // it), else nullopt. After Stop() the result of Stop() when that was a code.
  std::optional<int> Exited();
  // Sends `sig` to the process (to its group when it leads one).
  void Signal(int sig);
  // Signal(sig), then waits up to `timeout_ms` for the exit; SIGKILL if it
  // did not exit by then. The exit code; kTimeout if SIGKILL was needed.
  // Idempotent: later calls return the first result.
  StatusOr<int> Stop(int sig, int timeout_ms);
  // Waits up to `timeout_ms` for an exit without signalling; its code, or
  // nullopt if it still runs.
  std::optional<int> WaitExit(int timeout_ms);
  // Forgets the process without stopping it: it is meant to outlive this
  // object (ps_launch --detach). pid() is -1 afterwards.
  void Release() { pid_ = -1; }

 private:
  Process() = default;
  pid_t pid_ = -1;
  bool own_group_ = false;
  std::string name_;
  std::string log_path_;
  std::optional<StatusOr<int>> result_;
};

// Milliseconds on the monotonic clock, for the deadlines of the callers.
int64_t MonotonicMillis();
// "SIGTERM", "SIGINT", ... ("signal N" for the others), for messages.
std::string SignalName(int sig);

}  // namespace ps::launch
