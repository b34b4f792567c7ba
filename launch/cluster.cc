#include "launch/cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "core/transport_name.h"
#include "launch/server_command.h"
#include "launch/server_ready.h"
#include "launch/text_file.h"

namespace ps::launch {
namespace {

std::string WithIndex(std::string text, uint32_t index) {
  const std::string id = std::to_string(index);
  for (size_t at = text.find("{i}"); at != std::string::npos;
       at = text.find("{i}", at + id.size())) {
    text.replace(at, 3, id);
  }
  return text;
}

// The value of a per-server list for server `i` ("" when the list is empty).
std::string ForServer(const std::vector<std::string>& list, uint32_t i) {
  if (list.empty()) return "";
  return list.size() == 1 ? list[0] : list[i];
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) return IOError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "rename " + tmp, errno);
  }
  return Status::OK();
}

Status CheckExecutable(const std::string& what, const std::string& path) {
  if (path.empty()) return InvalidArgument(what + " is not set");
  if (access(path.c_str(), X_OK) != 0) {
    return InvalidArgument(what + " " + path + " is not an executable program");
  }
  return Status::OK();
}

Status CheckPerServer(const std::string& flag,
                      const std::vector<std::string>& list, uint32_t servers) {
  if (list.size() <= 1 || list.size() == servers) return Status::OK();
  return InvalidArgument(flag + " has " + std::to_string(list.size()) +
                         " entries; give one for every server or one per "
                         "server (" +
                         std::to_string(servers) + ")");
}

}  // namespace

std::vector<std::string> SplitWords(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    items.emplace_back(text.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

Status ValidateSpec(const ClusterSpec& s) {
  if (s.servers < 1 || s.servers > 4096) {
    return InvalidArgument("--servers must be in [1, 4096], not " +
                           std::to_string(s.servers));
  }
  if (s.workers > 65536) {
    return InvalidArgument("--workers must be in [0, 65536], not " +
                           std::to_string(s.workers));
  }
  if (s.server_num_workers != 0 && s.server_num_workers < s.workers) {
    return InvalidArgument(
        "--expected_workers (" + std::to_string(s.server_num_workers) +
        ") is below --workers (" + std::to_string(s.workers) + ")");
  }
  if (s.consistency == proto::CONSISTENCY_UNSET) {
    return InvalidArgument("--consistency is async, bsp or ssp, not unset");
  }
  if (s.transport == xfer::TransportChoice::kVerbs) {
    return InvalidArgument("--transport is auto, shm or tcp, not 'verbs'");
  }
  PS_RETURN_IF_ERROR(
      CheckPerServer("--server_listen_host", s.listen_hosts, s.servers));
  PS_RETURN_IF_ERROR(
      CheckPerServer("--server_advertise_host", s.advertise_hosts, s.servers));
  if (s.tables_path.empty()) return InvalidArgument("--tables is required");
  if (access(s.tables_path.c_str(), R_OK) != 0) {
    return InvalidArgument("cannot read tables " + s.tables_path);
  }
  PS_RETURN_IF_ERROR(CheckExecutable("--server_bin", s.server_bin));
  if (s.workers > 0) {
    PS_RETURN_IF_ERROR(CheckExecutable("--worker_bin", s.worker_bin));
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Cluster>> Cluster::Start(
    const ClusterSpec& spec, Log log, const std::function<bool()>& cancelled) {
  PS_RETURN_IF_ERROR(ValidateSpec(spec));
  std::unique_ptr<Cluster> c(new Cluster(spec, std::move(log)));
  // On an error the destructor stops what started.
  PS_RETURN_IF_ERROR(c->StartServers(cancelled));
  PS_RETURN_IF_ERROR(c->StartWorkers());
  return c;
}

Cluster::~Cluster() {
  if (!workers_.empty() || !servers_.empty()) {
    (void)StopGroup(workers_, SIGTERM);
    (void)StopGroup(servers_, SIGTERM);
  }
}

StatusOr<std::unique_ptr<Process>> Cluster::SpawnMember(
    const std::string& name, std::vector<std::string> argv,
    const std::vector<std::string>& prefix, uint32_t index) {
  ProcessSpec p;
  for (const auto& word : prefix) p.argv.push_back(WithIndex(word, index));
  for (auto& a : argv) p.argv.push_back(std::move(a));
  const std::string_view transport = xfer::TransportChoiceName(spec_.transport);
  p.env = {"GLOG_logtostderr=1",
           spec_.transport == xfer::TransportChoice::kAuto
               ? std::string("XFER_TRANSPORT")
               : "XFER_TRANSPORT=" + std::string(transport)};
  // The secret by path only (see ClusterSpec::secret_file).
  p.env.push_back("PS_CLUSTER_SECRET");
  p.env.push_back(spec_.secret_file.empty()
                      ? std::string("PS_CLUSTER_SECRET_FILE")
                      : "PS_CLUSTER_SECRET_FILE=" + spec_.secret_file);
  p.log_path = spec_.run_dir + "/" + name + ".log";
  p.name = name;
  p.die_with_parent = !spec_.detach;
  p.own_process_group = true;
  p.new_session = spec_.detach;
  PS_ASSIGN_OR_RETURN(auto process, Process::Spawn(p));
  PS_RETURN_IF_ERROR(WriteTextFile(spec_.run_dir + "/" + name + ".pid",
                                   std::to_string(process->pid()) + "\n"));
  return process;
}

Status Cluster::StartServers(const std::function<bool()>& cancelled) {
  std::vector<std::string> port_files;
  for (uint32_t i = 0; i < spec_.servers; ++i) {
    const std::string name = "server-" + std::to_string(i);
    ServerCommand c;
    c.binary = spec_.server_bin;
    c.shard_id = i;
    c.num_shards = spec_.servers;
    c.num_workers = spec_.server_num_workers != 0
                        ? spec_.server_num_workers
                        : std::max<uint32_t>(spec_.workers, 1);
    c.port_file = spec_.run_dir + "/" + name + ".addr";
    c.listen_host = ForServer(spec_.listen_hosts, i);
    c.tables_path = spec_.tables_path;
    c.apply_threads = spec_.apply_threads;
    c.consistency = spec_.consistency;
    c.staleness = spec_.staleness;
    c.transport = spec_.transport;
    if (std::string host = ForServer(spec_.advertise_hosts, i); !host.empty())
      c.extra_flags.push_back("--advertise_host=" + host);
    for (const auto& a : spec_.server_args)
      c.extra_flags.push_back(WithIndex(a, i));
    ::unlink(c.port_file.c_str());
    PS_ASSIGN_OR_RETURN(
        auto process, SpawnMember(name, ServerArgv(c), spec_.server_prefix, i));
    servers_.push_back(
        {std::move(process), spec_.run_dir + "/" + name + ".pid"});
    port_files.push_back(c.port_file);
  }
  std::vector<std::string> entries;
  for (uint32_t i = 0; i < spec_.servers; ++i) {
    auto address =
        AwaitAddress(*servers_[i].process, port_files[i],
                     spec_.ready_timeout_ms, spec_.stop_timeout_ms, cancelled);
    if (!address.ok()) return address.status();
    std::string entry = *address;
    if (std::string host = ForServer(spec_.advertise_hosts, i); !host.empty())
      entry = host + entry.substr(entry.rfind(':'));
    log_(servers_[i].process->name() + " (pid " +
         std::to_string(servers_[i].process->pid()) + ") ready at " + entry);
    entries.push_back(entry);
  }
  for (const auto& e : entries)
    server_list_ += (server_list_.empty() ? "" : ",") + e;
  return WriteTextFile(spec_.run_dir + "/cluster.env",
                       "SERVERS=" + server_list_ + "\n");
}

Status Cluster::StartWorkers() {
  for (uint32_t j = 0; j < spec_.workers; ++j) {
    std::vector<std::string> argv = {
        spec_.worker_bin, "--worker_id=" + std::to_string(j),
        "--num_workers=" + std::to_string(spec_.server_num_workers != 0
                                              ? spec_.server_num_workers
                                              : spec_.workers),
        "--servers=" + server_list_};
    if (spec_.transport != xfer::TransportChoice::kAuto) {
      argv.push_back("--transport=" +
                     std::string(xfer::TransportChoiceName(spec_.transport)));
    }
    for (const auto& a : spec_.worker_args) argv.push_back(WithIndex(a, j));
    const std::string name = "worker-" + std::to_string(j);
    PS_ASSIGN_OR_RETURN(auto process, SpawnMember(name, std::move(argv),
                                                  spec_.worker_prefix, j));
    log_(name + " (pid " + std::to_string(process->pid()) + ") started");
    workers_.push_back(
        {std::move(process), spec_.run_dir + "/" + name + ".pid"});
  }
  return Status::OK();
}

std::vector<pid_t> Cluster::server_pids() const {
  std::vector<pid_t> pids;
  for (const auto& m : servers_) pids.push_back(m.process->pid());
  return pids;
}

std::vector<pid_t> Cluster::worker_pids() const {
  std::vector<pid_t> pids;
  for (const auto& m : workers_) pids.push_back(m.process->pid());
  return pids;
}

void Cluster::Reaped(Member& m, int code) {
  m.done = true;
  ::unlink(m.pid_file.c_str());
  log_(m.process->name() + " exited with code " + std::to_string(code) +
       (code == 0 ? "" : " (log: " + m.process->log_path() + ")"));
}

int Cluster::StopGroup(std::vector<Member>& group, int sig) {
  // One signal each: a second SIGTERM tells a ps_server to give up its
  // final checkpoint.
  for (auto& m : group) {
    if (!m.done) m.process->Signal(sig);
  }
  int first_failure = 0;
  const int64_t deadline = MonotonicMillis() + spec_.stop_timeout_ms;
  for (auto& m : group) {
    if (m.done) continue;
    const int64_t left = std::max<int64_t>(0, deadline - MonotonicMillis());
    std::optional<int> code = m.process->WaitExit(static_cast<int>(left));
    if (!code) {
      log_(m.process->name() + " (pid " + std::to_string(m.process->pid()) +
           ") ignored " + SignalName(sig) + " for " +
           std::to_string(spec_.stop_timeout_ms / 1000) + " s: SIGKILL");
      (void)m.process->Stop(SIGKILL, spec_.stop_timeout_ms);
      m.done = true;
      ::unlink(m.pid_file.c_str());
      if (first_failure == 0) first_failure = 1;
      continue;
    }
    Reaped(m, *code);
    // A process that ended on the forwarded signal itself did what it
    // was asked; any other non-zero code is a failure.
    if (*code != 0 && *code != 128 + sig && first_failure == 0)
      first_failure = *code;
  }
  return first_failure;
}

int Cluster::Finish(int result) {
  (void)StopGroup(workers_, SIGTERM);
  int stop_code = StopGroup(servers_, SIGTERM);
  return result != 0 ? result : stop_code;
}

int Cluster::Supervise(const std::function<int()>& pending_signal) {
  size_t workers_left = workers_.size();
  for (;;) {
    if (int sig = pending_signal()) {
      log_(SignalName(sig) + ": stopping the cluster");
      (void)StopGroup(workers_, sig);
      (void)StopGroup(servers_, sig);
      return 128 + sig;
    }
    for (auto& w : workers_) {
      if (w.done) continue;
      if (auto code = w.process->Exited()) {
        Reaped(w, *code);
        --workers_left;
        if (*code != 0) return Finish(*code);
      }
    }
    bool servers_done = true;
    for (auto& s : servers_) {
      if (s.done) continue;
      if (auto code = s.process->Exited()) {
        Reaped(s, *code);
        // A server may end by itself (a Shutdown request) only when no
        // worker needs it.
        if (workers_left > 0 || *code != 0) {
          log_(s.process->name() + " ended" +
               (workers_left > 0 ? " while workers ran" : ""));
          return Finish(*code == 0 ? 1 : *code);
        }
      } else {
        servers_done = false;
      }
    }
    if (!workers_.empty() && workers_left == 0) {
      log_("every worker is done: stopping the servers");
      return Finish(0);
    }
    if (servers_done) return 0;
    usleep(20000);
  }
}

void Cluster::Release() {
  for (auto& m : workers_) m.process->Release();
  for (auto& m : servers_) m.process->Release();
  workers_.clear();
  servers_.clear();
}

}  // namespace ps::launch
