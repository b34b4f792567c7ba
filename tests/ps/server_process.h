// Test harness for integration tests that run real ps_server processes.
//
// A ServerProcess is one ps_server started with fork + exec on 127.0.0.1,
// control port 0 and --port_file in a scratch folder; Start() returns once
// the server wrote its address there. The object owns the process: Stop()
// sends SIGTERM and waits for a clean exit (SIGKILL after a timeout), and the
// destructor does the same, so a test that fails an assertion half-way never
// leaves a server behind. The child also gets PR_SET_PDEATHSIG(SIGKILL), so a
// test binary that crashes takes its servers with it.
//
// Every server writes its stdout and stderr (glog, GLOG_logtostderr=1) to
// <dir>/server-<shard>.log, which tests read to check what the server logged.
//
// The process handling itself (fork + exec, reaping, stopping, the port
// file) is launch/'s, which ps_launch uses too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "launch/process.h"
#include "launch/text_file.h"
#include "protocol/ps.pb.h"

namespace ps::testing {

// Sanitizer builds run several times slower: every timeout of the ps tests is
// multiplied by this.
int SlowdownFactor();

// PS_TEST_SCALE (a positive number, default 1) scales long test phases such
// as the 10 s async run; CMake sets it below 1 for sanitizer builds.
double TestScale();

// "shm" / "tcp" / "auto": the --transport flag value for a choice.
std::string TransportFlag(xfer::TransportChoice transport);

// A fresh folder under $TMPDIR (or /tmp), removed with its content when the
// object dies unless PS_TEST_KEEP_DIRS is set (then its path is printed).
class ScratchDir {
 public:
  static StatusOr<std::unique_ptr<ScratchDir>> Create(const std::string& tag);
  ~ScratchDir();
  const std::string& path() const { return path_; }
  // Writes `content` to <path>/<name> and returns the full path.
  StatusOr<std::string> WriteFile(const std::string& name,
                                  const std::string& content) const;

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

struct ServerOptions {
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t num_workers = 1;
  std::string tables_path;  // text-format TableConfig
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 2;
  xfer::TransportChoice transport = xfer::TransportChoice::kAuto;
  uint32_t apply_threads = 1;
  uint32_t inbox_slots = 0;  // 0: the server's default
  uint32_t slot_bytes = 0;   // 0: the server's default
  std::vector<std::string> extra_flags;
};

class ServerProcess {
 public:
  // Starts `binary` with the flags of `options` and waits (up to
  // 30 s x SlowdownFactor()) until it published its control address. On
  // failure the process is gone and the status carries the end of its log.
  static StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const ServerOptions& options,
      const std::string& dir);
  // Start in two halves, for servers that must start together (a restore
  // waits for every shard): Launch starts the process, WaitReady waits for
  // its address as Start does (on failure the process is gone).
  static StatusOr<std::unique_ptr<ServerProcess>> Launch(
      const std::string& binary, const ServerOptions& options,
      const std::string& dir);
  Status WaitReady();
  // Its exit code once it exited by itself (reaps it), else nullopt.
  std::optional<int> Exited();

  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // "host:port" of the control listener.
  const std::string& address() const { return address_; }
  const std::string& log_path() const { return process_->log_path(); }
  pid_t pid() const { return process_->pid(); }

  // SIGTERM, then wait up to `timeout_ms` for the exit; SIGKILL if it did
  // not exit by then. Returns the exit code (128 + signal when a signal ended
  // it); kTimeout if SIGKILL was needed. Idempotent: later calls return the
  // first result.
  StatusOr<int> Stop(int timeout_ms);

  // The whole log, as far as written.
  std::string ReadLog() const;

 private:
  ServerProcess() = default;
  std::unique_ptr<launch::Process> process_;
  std::string address_;
  std::string port_file_;
};

// The last `max_bytes` of a file ("" if it cannot be read).
using launch::FileTail;

}  // namespace ps::testing
