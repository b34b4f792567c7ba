#include "tests/ps/server_process.h"

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
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace ps::testing {
namespace {

int64_t NowMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

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

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "host:port" with a port in [1, 65535], surrounding whitespace dropped.
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

}  // namespace

int SlowdownFactor() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 6;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return 6;
#else
  return 1;
#endif
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
  switch (transport) {
    case xfer::TransportChoice::kShm:
      return "shm";
    case xfer::TransportChoice::kTcp:
      return "tcp";
    default:
      return "auto";
  }
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

std::string FileTail(const std::string& path, size_t max_bytes) {
  auto text = ReadWholeFile(path);
  if (!text) return "";
  if (text->size() > max_bytes) return text->substr(text->size() - max_bytes);
  return *text;
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
  const std::string log_path = dir + "/" + tag + ".log";
  ::unlink(port_file.c_str());

  // Everything the child needs is built here: after fork it only calls
  // async-signal-safe functions.
  std::vector<std::string> args = {
      binary,
      "--shard_id=" + std::to_string(o.shard_id),
      "--num_shards=" + std::to_string(o.num_shards),
      "--num_workers=" + std::to_string(o.num_workers),
      "--port=0",
      "--port_file=" + port_file,
      "--listen_host=127.0.0.1",
      "--tables=" + o.tables_path,
      "--apply_threads=" + std::to_string(o.apply_threads),
      "--consistency=" + o.consistency,
      "--staleness=" + std::to_string(o.staleness),
      "--transport=" + TransportFlag(o.transport),
  };
  if (o.inbox_slots != 0)
    args.push_back("--inbox_slots=" + std::to_string(o.inbox_slots));
  if (o.slot_bytes != 0)
    args.push_back("--slot_bytes=" + std::to_string(o.slot_bytes));
  for (const auto& f : o.extra_flags) args.push_back(f);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GLOG_logtostderr=", 17) == 0) continue;
    if (std::strncmp(*e, "XFER_TRANSPORT=", 15) == 0) continue;
    env_strings.emplace_back(*e);
  }
  env_strings.emplace_back("GLOG_logtostderr=1");
  if (o.transport != xfer::TransportChoice::kAuto) {
    env_strings.push_back("XFER_TRANSPORT=" + TransportFlag(o.transport));
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int log_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return ErrnoStatus(StatusCode::kIOError, "open " + log_path, errno);
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
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(97);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execve(argv[0], argv.data(), envp.data());
    static const char kMsg[] = "exec of ps_server failed\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    _exit(127);
  }
  close(log_fd);

  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->pid_ = pid;
  server->log_path_ = log_path;
  server->port_file_ = port_file;
  server->tag_ = tag;
  return server;
}

Status ServerProcess::WaitReady() {
  const int64_t deadline = NowMillis() + 30000LL * SlowdownFactor();
  std::string last_seen;
  for (;;) {
    if (pid_ <= 0) return Internal(tag_ + " is not running");
    if (auto code = TryReap(pid_)) {
      pid_ = -1;
      stop_result_ = StatusOr<int>(*code);
      return Internal(tag_ + " exited with code " + std::to_string(*code) +
                      " before publishing its address; log:\n" +
                      FileTail(log_path_, 4000));
    }
    // The address counts once it parses and two reads 20 ms apart agree (a
    // reader may catch the file half-written).
    if (auto text = ReadWholeFile(port_file_)) {
      if (auto addr = ParseAddress(*text)) {
        if (*addr == last_seen) {
          address_ = *addr;
          return Status::OK();
        }
        last_seen = *addr;
      }
    }
    if (NowMillis() > deadline) {
      std::string tail = FileTail(log_path_, 4000);
      (void)Stop(10000 * SlowdownFactor());
      return Timeout(tag_ + " did not write " + port_file_ +
                     " in time; log:\n" + tail);
    }
    usleep(20000);
  }
}

std::optional<int> ServerProcess::Exited() {
  if (stop_result_) {
    return stop_result_->ok() ? std::optional<int>(**stop_result_)
                              : std::nullopt;
  }
  if (pid_ <= 0) return std::nullopt;
  if (auto code = TryReap(pid_)) {
    pid_ = -1;
    stop_result_ = StatusOr<int>(*code);
    return *code;
  }
  return std::nullopt;
}

StatusOr<int> ServerProcess::Stop(int timeout_ms) {
  if (stop_result_) return *stop_result_;
  if (pid_ <= 0) return Internal("server was never started");
  kill(pid_, SIGTERM);
  const int64_t deadline = NowMillis() + timeout_ms;
  for (;;) {
    if (auto code = TryReap(pid_)) {
      pid_ = -1;
      stop_result_ = StatusOr<int>(*code);
      return *stop_result_;
    }
    if (NowMillis() > deadline) break;
    usleep(5000);
  }
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  stop_result_ = StatusOr<int>(
      Timeout("server pid " + std::to_string(pid_) + " ignored SIGTERM for " +
              std::to_string(timeout_ms) + " ms; killed"));
  pid_ = -1;
  return *stop_result_;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) (void)Stop(10000 * SlowdownFactor());
}

std::string ServerProcess::ReadLog() const {
  return ReadWholeFile(log_path_).value_or("");
}

}  // namespace ps::testing
