#include "launch/stop_run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "launch/process.h"
#include "launch/text_file.h"

namespace ps::launch {
namespace {

namespace fs = std::filesystem;

struct Target {
  std::string pid_file;
  std::string name;  // "worker-0"
  pid_t pid = 0;
};

// Running and not a zombie (a zombie's reaper may be slow, or absent in a
// container whose init does not reap).
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  auto stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  size_t paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() ||
         (*stat)[paren + 2] != 'Z';
}

// The pid of `pid_file` if it runs a program whose command line holds
// `marker`, else 0.
pid_t LivePid(const std::string& pid_file, const std::string& marker) {
  auto text = ReadWholeFile(pid_file);
  if (!text) return 0;
  char* end = nullptr;
  long pid = std::strtol(text->c_str(), &end, 10);
  if (pid <= 1 || end == text->c_str()) return 0;
  if (!Alive(static_cast<pid_t>(pid))) return 0;
  auto cmdline = ReadWholeFile("/proc/" + std::to_string(pid) + "/cmdline");
  if (!cmdline) return 0;
  std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
  if (cmdline->find(marker) == std::string::npos) return 0;
  return static_cast<pid_t>(pid);
}

void SignalTarget(pid_t pid, int sig) {
  if (getpgid(pid) == pid) {
    kill(-pid, sig);  // a group leader: reach what a prefix forked too
  } else {
    kill(pid, sig);
  }
}

// Stops the processes of the pid files named `<prefix>-*.pid`; whether one
// needed SIGKILL.
bool StopGroup(const std::string& run_dir, const std::string& prefix,
               int timeout_ms,
               const std::function<void(std::string_view)>& log) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix + "-", 0) == 0 && name.size() > 4 &&
        name.substr(name.size() - 4) == ".pid") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Target> targets;
  for (const auto& f : files) {
    pid_t pid = LivePid(f, "--num_workers=");
    if (pid == 0) {
      ::unlink(f.c_str());
      continue;
    }
    std::string name = fs::path(f).stem().string();
    targets.push_back({f, name, pid});
    SignalTarget(pid, SIGTERM);
  }
  bool killed = false;
  const int64_t deadline = MonotonicMillis() + timeout_ms;
  for (;;) {
    bool left = false;
    for (const auto& t : targets) left |= Alive(t.pid);
    if (!left) break;
    if (MonotonicMillis() >= deadline) {
      for (const auto& t : targets) {
        if (!Alive(t.pid)) continue;
        log(t.name + " (pid " + std::to_string(t.pid) +
            ") ignored SIGTERM for " + std::to_string(timeout_ms / 1000) +
            "s: SIGKILL");
        SignalTarget(t.pid, SIGKILL);
        killed = true;
      }
      break;
    }
    usleep(50000);
  }
  for (const auto& t : targets) {
    std::printf("stopped %s (pid %d)\n", t.name.c_str(),
                static_cast<int>(t.pid));
    ::unlink(t.pid_file.c_str());
  }
  std::fflush(stdout);
  return killed;
}

}  // namespace

StatusOr<std::string> NewestRunDir(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("cluster-", 0) == 0)
      found.push_back(entry.path().string());
  }
  if (found.empty())
    return NotFound("no run folder given and none under " + dir);
  return *std::max_element(found.begin(), found.end());
}

StatusOr<int> StopRunDir(const std::string& run_dir, int timeout_ms,
                         const std::function<void(std::string_view)>& log) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    return InvalidArgument("no folder " + run_dir);
  }
  bool killed = false;
  // A supervising launcher stops its own cluster in order (it has stop
  // timeouts of its own; give it both groups' time and some).
  const std::string launch_pid = run_dir + "/launch.pid";
  if (pid_t pid = LivePid(launch_pid, "ps_launch")) {
    kill(pid, SIGTERM);
    const int64_t deadline = MonotonicMillis() + 2LL * timeout_ms + 10000;
    while (Alive(pid) && MonotonicMillis() < deadline) usleep(50000);
    if (Alive(pid)) {
      log("ps_launch (pid " + std::to_string(pid) +
          ") did not stop its cluster in time: SIGKILL");
      kill(pid, SIGKILL);
      killed = true;
    }
    std::printf("stopped ps_launch (pid %d)\n", static_cast<int>(pid));
  }
  ::unlink(launch_pid.c_str());
  killed |= StopGroup(run_dir, "worker", timeout_ms, log);
  killed |= StopGroup(run_dir, "server", timeout_ms, log);
  std::printf("cluster in %s stopped; logs kept there\n", run_dir.c_str());
  return killed ? 1 : 0;
}

}  // namespace ps::launch
