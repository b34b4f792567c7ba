#include "tests/ps/server_process.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/sanitizers.h"
#include "core/transport_name.h"
#include "launch/server_command.h"
#include "launch/server_ready.h"

namespace ps::testing {

int SlowdownFactor() {
#if defined(PS_ASAN) || defined(PS_TSAN)
  return 6;
#else
  return 1;
#endif
}

double TestScale() {
  const char* env = std::getenv("PS_TEST_SCALE");
  if (env == nullptr || *env == '\0') return 1.0;
  char* end = nullptr;
  double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v > 0.0) || v > 100.0) {
    std::fprintf(stderr,
                 "PS_TEST_SCALE='%s' is not a number in (0, 100]; "
                 "using 1\n",
                 env);
    return 1.0;
  }
  return v;
}

std::string TransportFlag(xfer::TransportChoice transport) {
  // Processes take auto, shm or tcp; verbs comes with auto between hosts.
  if (transport == xfer::TransportChoice::kVerbs) return "auto";
  return std::string(xfer::TransportChoiceName(transport));
}

StatusOr<std::unique_ptr<ScratchDir>> ScratchDir::Create(
    const std::string& tag) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/ps-" + tag + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return ErrnoStatus(StatusCode::kIOError, "mkdtemp " + pattern, errno);
  }
  return std::unique_ptr<ScratchDir>(new ScratchDir(buf.data()));
}

ScratchDir::~ScratchDir() {
  if (std::getenv("PS_TEST_KEEP_DIRS") != nullptr) {
    std::fprintf(stderr, "kept test folder %s\n", path_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

StatusOr<std::string> ScratchDir::WriteFile(const std::string& name,
                                            const std::string& content) const {
  std::string full = path_ + "/" + name;
  std::ofstream out(full, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return IOError("cannot write " + full);
  return full;
}

StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const ServerOptions& o, const std::string& dir) {
  PS_ASSIGN_OR_RETURN(auto server, Launch(binary, o, dir));
  PS_RETURN_IF_ERROR(server->WaitReady());
  return server;
}

StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Launch(
    const std::string& binary, const ServerOptions& o, const std::string& dir) {
  const std::string tag = "server-" + std::to_string(o.shard_id);
  const std::string port_file = dir + "/" + tag + ".addr";
  ::unlink(port_file.c_str());

  launch::ServerCommand command;
  command.binary = binary;
  command.shard_id = o.shard_id;
  command.num_shards = o.num_shards;
  command.num_workers = o.num_workers;
  command.port_file = port_file;
  command.listen_host = "127.0.0.1";
  command.tables_path = o.tables_path;
  command.apply_threads = o.apply_threads;
  command.consistency = o.consistency;
  command.staleness = o.staleness;
  // Processes take auto, shm or tcp; verbs comes with auto between hosts.
  command.transport = o.transport == xfer::TransportChoice::kVerbs
                          ? xfer::TransportChoice::kAuto
                          : o.transport;
  command.inbox_slots = o.inbox_slots;
  command.slot_bytes = o.slot_bytes;
  command.extra_flags = o.extra_flags;

  launch::ProcessSpec spec;
  spec.argv = launch::ServerArgv(command);
  spec.env = {"GLOG_logtostderr=1",
              o.transport == xfer::TransportChoice::kAuto
                  ? std::string("XFER_TRANSPORT")
                  : "XFER_TRANSPORT=" + TransportFlag(o.transport)};
  spec.log_path = dir + "/" + tag + ".log";
  spec.name = tag;
  PS_ASSIGN_OR_RETURN(auto process, launch::Process::Spawn(spec));

  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->process_ = std::move(process);
  server->port_file_ = port_file;
  return server;
}

Status ServerProcess::WaitReady() {
  PS_ASSIGN_OR_RETURN(address_, launch::AwaitAddress(*process_, port_file_,
                                                     30000LL * SlowdownFactor(),
                                                     10000 * SlowdownFactor()));
  return Status::OK();
}

std::optional<int> ServerProcess::Exited() { return process_->Exited(); }

StatusOr<int> ServerProcess::Stop(int timeout_ms) {
  return process_->Stop(SIGTERM, timeout_ms);
}

ServerProcess::~ServerProcess() {
  if (process_ && process_->pid() > 0) (void)Stop(10000 * SlowdownFactor());
}

std::string ServerProcess::ReadLog() const {
  return launch::ReadWholeFile(log_path()).value_or("");
}

}  // namespace ps::testing
