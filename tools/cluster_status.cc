#include "tools/cluster_status.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>

#include "protocol/control_channel.h"

namespace ps::tools {
namespace {

using Clock = std::chrono::steady_clock;

// One server's query, shared by the asking thread and the caller: a query
// still running at the deadline keeps it alive by itself.
struct Query {
  bool done = false;    // guarded by Shared::mu
  ServerAnswer answer;  // guarded by Shared::mu
};

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
};

void Ask(const std::shared_ptr<Query>& q, const std::shared_ptr<Shared>& shared,
         std::string address, int timeout_ms, xfer::ClusterSecret secret) {
  ServerAnswer a;
  a.address = address;
  const auto start = Clock::now();
  auto client = protocol::ControlClient::Connect(
      address, {.timeout_ms = timeout_ms, .secret = std::move(secret)});
  if (!client.ok()) {
    a.error = client.status();
  } else {
    proto::ControlRequest request;
    request.set_status(true);
    auto reply = client->Call(request);
    if (!reply.ok()) {
      a.error = reply.status();
    } else if (!reply->has_status()) {
      a.error = NotSupported("server " + address +
                             " does not know the status request (an older "
                             "ps_server?)");
    } else {
      a.answered = true;
      a.status = reply->status();
    }
  }
  a.reply_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::lock_guard<std::mutex> lock(shared->mu);
  q->answer = std::move(a);
  q->done = true;
  shared->cv.notify_all();
}

std::string StateName(proto::ServerStatusReply::State s) {
  switch (s) {
    case proto::ServerStatusReply::STARTING:
      return "starting";
    case proto::ServerStatusReply::SERVING:
      return "serving";
    case proto::ServerStatusReply::STOPPING:
      return "stopping";
    default:
      return "?";
  }
}

std::string WorkerStateName(proto::WorkerStatus::State s) {
  switch (s) {
    case proto::WorkerStatus::CONNECTED:
      return "connected";
    case proto::WorkerStatus::GONE:
      return "gone";
    case proto::WorkerStatus::NEVER:
      return "not seen";
    default:
      return "?";
  }
}

std::string ConsistencyName(const proto::ServerStatusReply& s) {
  switch (s.consistency()) {
    case proto::CONSISTENCY_BSP:
      return "bsp";
    case proto::CONSISTENCY_SSP:
      return "ssp (staleness " + std::to_string(s.staleness()) + ")";
    default:
      return "async";
  }
}

std::string Duration(int64_t ms) {
  if (ms < 0) return "-";
  const int64_t s = ms / 1000;
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", ms / 1000.0);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", static_cast<long>(s / 60),
                  static_cast<long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", static_cast<long>(s / 3600),
                  static_cast<long>(s / 60 % 60));
  }
  return buf;
}

// One worker as the answering servers see it together.
struct WorkerView {
  uint32_t id = 0;
  proto::WorkerStatus::State state = proto::WorkerStatus::NEVER;
  bool has_clock = false;  // shard 0 answered
  uint64_t clock = 0;
  uint64_t applied = 0;  // packets, summed over the answering shards
  uint64_t rejected = 0;
  int64_t last_seen_unix_ms = 0;
  std::string inbox;                                   // "s0 0/64 s1 3/64"
  std::vector<std::pair<uint32_t, uint32_t>> pending;  // (shard, pending)
  std::string address;
};

std::vector<WorkerView> Workers(const ClusterStatus& c) {
  uint32_t n = 0;
  for (const ServerAnswer& a : c.servers) {
    if (a.answered) n = std::max(n, a.status.num_workers());
  }
  std::vector<WorkerView> views(n);
  for (uint32_t w = 0; w < n; ++w) views[w].id = w;
  for (const ServerAnswer& a : c.servers) {
    if (!a.answered) continue;
    const proto::ServerStatusReply& s = a.status;
    for (const proto::WorkerStatus& ws : s.workers()) {
      if (ws.worker_id() >= n) continue;
      WorkerView& v = views[ws.worker_id()];
      // Connected anywhere beats gone beats never seen.
      if (ws.state() == proto::WorkerStatus::CONNECTED ||
          (ws.state() == proto::WorkerStatus::GONE &&
           v.state == proto::WorkerStatus::NEVER)) {
        v.state = ws.state();
      }
      if (s.shard_id() == 0) {
        v.has_clock = true;
        v.clock = ws.clock();
      }
      v.applied += ws.inbox_applied();
      v.rejected += ws.packets_rejected();
      if (ws.last_seen_unix_ms() > v.last_seen_unix_ms) {
        v.last_seen_unix_ms = ws.last_seen_unix_ms();
        v.address = ws.address();
      }
      if (!v.inbox.empty()) v.inbox += "  ";
      v.inbox += "s" + std::to_string(s.shard_id()) + " " +
                 std::to_string(ws.inbox_pending()) + "/" +
                 std::to_string(s.inbox_slots());
      v.pending.emplace_back(s.shard_id(), ws.inbox_pending());
    }
  }
  return views;
}

// The newest complete checkpoint any answering server sees (0: none).
uint64_t LatestCheckpoint(const ClusterStatus& c, std::string* dir) {
  uint64_t step = 0;
  for (const ServerAnswer& a : c.servers) {
    if (!a.answered || a.status.checkpoint_dir().empty()) continue;
    if (dir->empty()) *dir = a.status.checkpoint_dir();
    if (a.status.newest_complete_step() > step) {
      step = a.status.newest_complete_step();
      *dir = a.status.checkpoint_dir();
    }
  }
  return step;
}

// Rows of cells -> text, each column as wide as its widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) {
      width[i] = std::max(width[i], r[i].size());
    }
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size())
        line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

std::string Num(uint64_t v) { return std::to_string(v); }

std::string LocalTime(int64_t unix_ms) {
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  tm parts{};
  localtime_r(&t, &parts);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &parts);
  return buf;
}

}  // namespace

size_t ClusterStatus::lost_servers() const {
  return static_cast<size_t>(
      std::count_if(servers.begin(), servers.end(),
                    [](const ServerAnswer& a) { return !a.answered; }));
}

ClusterStatus QueryCluster(const std::vector<std::string>& addresses,
                           int timeout_ms, const xfer::ClusterSecret& secret) {
  ClusterStatus c;
  c.timeout_ms = timeout_ms;
  c.asked_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  auto shared = std::make_shared<Shared>();
  std::vector<std::shared_ptr<Query>> queries;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (const std::string& address : addresses) {
    auto q = std::make_shared<Query>();
    queries.push_back(q);
    try {
      std::thread(Ask, q, shared, address, timeout_ms, secret).detach();
    } catch (const std::system_error& e) {
      std::lock_guard<std::mutex> lock(shared->mu);
      q->answer.address = address;
      q->answer.error =
          Internal(std::string("no thread to ask it: ") + e.what());
      q->done = true;
    }
  }
  std::unique_lock<std::mutex> lock(shared->mu);
  // A little past the deadline: a query that timed out itself says why.
  shared->cv.wait_until(lock, deadline + std::chrono::milliseconds(200), [&] {
    return std::all_of(queries.begin(), queries.end(),
                       [](const auto& q) { return q->done; });
  });
  for (size_t i = 0; i < queries.size(); ++i) {
    if (queries[i]->done) {
      c.servers.push_back(queries[i]->answer);
    } else {
      ServerAnswer a;
      a.address = addresses[i];
      a.error = Timeout("no answer within " + std::to_string(timeout_ms) +
                        " ms (--timeout_ms): the server is stuck or "
                        "unreachable");
      a.reply_ms = timeout_ms;
      c.servers.push_back(std::move(a));
    }
  }
  return c;
}

std::string FormatText(const ClusterStatus& c) {
  const std::vector<WorkerView> workers = Workers(c);
  std::string consistency = "?";
  uint32_t num_shards = 0;
  for (const ServerAnswer& a : c.servers) {
    if (!a.answered) continue;
    consistency = ConsistencyName(a.status);
    num_shards = std::max(num_shards, a.status.num_shards());
  }
  std::string out =
      "cluster: " + std::to_string(c.servers.size()) + " server(s) asked";
  if (num_shards != 0 && num_shards != c.servers.size()) {
    out += " of " + std::to_string(num_shards) + " shards";
  }
  out += ", " + std::to_string(c.lost_servers()) + " lost; " +
         std::to_string(workers.size()) + " worker(s); " + consistency +
         "; asked " + LocalTime(c.asked_unix_ms) + "\n";

  std::vector<std::vector<std::string>> rows = {
      {"SHARD", "ADDRESS", "STATE", "UPTIME", "ROWS APPLIED", "PACKETS",
       "REJECTED", "LAST CUT", "VERSION"}};
  for (const ServerAnswer& a : c.servers) {
    if (!a.answered) {
      rows.push_back({"?", a.address, "LOST", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    const proto::ServerStatusReply& s = a.status;
    rows.push_back(
        {std::to_string(s.shard_id()), a.address, StateName(s.state()),
         Duration(s.uptime_ms()), Num(s.stats().rows_applied()),
         Num(s.stats().packets_applied()), Num(s.stats().packets_rejected()),
         s.checkpoint_dir().empty() ? "-" : Num(s.last_cut_step()),
         s.version().empty() ? "-" : s.version()});
  }
  out += "\n" + Table(rows);

  if (!workers.empty()) {
    rows = {{"WORKER", "STATE", "CLOCK", "INBOX PENDING/SLOTS", "PACKETS",
             "REJECTED", "LAST SEEN", "FROM"}};
    uint64_t slowest = UINT64_MAX, fastest = 0;
    for (const WorkerView& w : workers) {
      if (w.has_clock) {
        slowest = std::min(slowest, w.clock);
        fastest = std::max(fastest, w.clock);
      }
      rows.push_back({std::to_string(w.id), WorkerStateName(w.state),
                      w.has_clock ? Num(w.clock) : "-", w.inbox, Num(w.applied),
                      Num(w.rejected),
                      w.last_seen_unix_ms > 0
                          ? Duration(std::max<int64_t>(
                                0, c.asked_unix_ms - w.last_seen_unix_ms)) +
                                " ago"
                          : "-",
                      w.address.empty() ? "-" : w.address});
    }
    out += "\n" + Table(rows);
    if (fastest > 0 || slowest != UINT64_MAX) {
      out += "steps: slowest worker at clock " + Num(slowest) +
             ", fastest at " + Num(fastest) + "\n";
    } else {
      out += "steps: unknown (shard 0 did not answer)\n";
    }
  }

  std::string dir;
  const uint64_t latest = LatestCheckpoint(c, &dir);
  out += "\nlatest checkpoint: ";
  if (dir.empty()) {
    out += "none (no server has --checkpoint_dir)\n";
  } else if (latest == 0) {
    out += "none complete yet in " + dir + "\n";
  } else {
    out += "step " + Num(latest) + " in " + dir + "\n";
  }

  std::vector<std::string> lost;
  for (const ServerAnswer& a : c.servers) {
    if (!a.answered) {
      lost.push_back("server " + a.address + ": " + a.error.message());
    }
  }
  for (const WorkerView& w : workers) {
    if (w.state == proto::WorkerStatus::GONE) {
      lost.push_back("worker " + std::to_string(w.id) +
                     ": no control connection to any server that answered "
                     "(finished, or lost)");
    }
  }
  out += "lost peers: ";
  if (lost.empty()) {
    out += "none\n";
  } else {
    out += std::to_string(lost.size()) + "\n";
    for (const std::string& l : lost) out += "  " + l + "\n";
  }
  return out;
}

std::string FormatJson(const ClusterStatus& c) {
  std::string out = "{\"asked_unix_ms\": " + std::to_string(c.asked_unix_ms) +
                    ", \"timeout_ms\": " + std::to_string(c.timeout_ms) +
                    ", \"lost_servers\": " + Num(c.lost_servers()) +
                    ",\n \"servers\": [";
  bool first = true;
  for (const ServerAnswer& a : c.servers) {
    out += first ? "\n  {" : ",\n  {";
    first = false;
    out += "\"address\": " + JsonString(a.address) +
           ", \"answered\": " + (a.answered ? "true" : "false");
    char ms[32];
    std::snprintf(ms, sizeof(ms), "%.3f", a.reply_ms);
    out += ", \"reply_ms\": " + std::string(ms);
    if (!a.answered) {
      out +=
          ", \"state\": \"lost\", \"error\": " + JsonString(a.error.message()) +
          "}";
      continue;
    }
    const proto::ServerStatusReply& s = a.status;
    out += ", \"state\": " + JsonString(StateName(s.state())) +
           ", \"shard_id\": " + Num(s.shard_id()) +
           ", \"num_shards\": " + Num(s.num_shards()) +
           ", \"num_workers\": " + Num(s.num_workers()) +
           ", \"control_address\": " + JsonString(s.control_address()) +
           ", \"xfer_address\": " + JsonString(s.xfer_address()) +
           ", \"consistency\": " + JsonString(ConsistencyName(s)) +
           ", \"uptime_ms\": " + std::to_string(s.uptime_ms()) +
           ", \"version\": " + JsonString(s.version()) +
           ", \"packets_applied\": " + Num(s.stats().packets_applied()) +
           ", \"rows_applied\": " + Num(s.stats().rows_applied()) +
           ", \"packets_rejected\": " + Num(s.stats().packets_rejected()) +
           ", \"inbox_slots\": " + Num(s.inbox_slots()) +
           ", \"checkpoint_dir\": " + JsonString(s.checkpoint_dir()) +
           ", \"last_cut_step\": " + Num(s.last_cut_step()) +
           ", \"newest_complete_step\": " + Num(s.newest_complete_step()) +
           ", \"restored_step\": " + Num(s.restored_step()) +
           ",\n   \"workers\": [";
    bool wfirst = true;
    for (const proto::WorkerStatus& w : s.workers()) {
      out += wfirst ? "" : ", ";
      wfirst = false;
      out +=
          "{\"worker_id\": " + Num(w.worker_id()) +
          ", \"state\": " + JsonString(WorkerStateName(w.state())) +
          ", \"clock\": " + (s.shard_id() == 0 ? Num(w.clock()) : "null") +
          ", \"inbox_applied\": " + Num(w.inbox_applied()) +
          ", \"inbox_pending\": " + Num(w.inbox_pending()) +
          ", \"packets_rejected\": " + Num(w.packets_rejected()) +
          ", \"last_seen_unix_ms\": " + std::to_string(w.last_seen_unix_ms()) +
          ", \"address\": " + JsonString(w.address()) + "}";
    }
    out += "]}";
  }
  out += "\n ],\n \"workers\": [";
  first = true;
  for (const WorkerView& w : Workers(c)) {
    out += first ? "\n  " : ",\n  ";
    first = false;
    out += "{\"worker_id\": " + Num(w.id) +
           ", \"state\": " + JsonString(WorkerStateName(w.state)) +
           ", \"clock\": " + (w.has_clock ? Num(w.clock) : "null") +
           ", \"packets_applied\": " + Num(w.applied) +
           ", \"packets_rejected\": " + Num(w.rejected) +
           ", \"inbox_pending\": {";
    bool pfirst = true;
    for (const auto& [shard, pending] : w.pending) {
      out += (pfirst ? "\"" : ", \"") + Num(shard) + "\": " + Num(pending);
      pfirst = false;
    }
    out += "}}";
  }
  std::string dir;
  const uint64_t latest = LatestCheckpoint(c, &dir);
  out += "\n ],\n \"latest_checkpoint\": ";
  out += latest == 0 ? "null"
                     : "{\"step\": " + Num(latest) +
                           ", \"dir\": " + JsonString(dir) + "}";
  out += ",\n \"lost\": [";
  first = true;
  for (const ServerAnswer& a : c.servers) {
    if (a.answered) continue;
    out += first ? "" : ", ";
    first = false;
    out += "{\"kind\": \"server\", \"address\": " + JsonString(a.address) +
           ", \"why\": " + JsonString(a.error.message()) + "}";
  }
  for (const WorkerView& w : Workers(c)) {
    if (w.state != proto::WorkerStatus::GONE) continue;
    out += first ? "" : ", ";
    first = false;
    out += "{\"kind\": \"worker\", \"worker_id\": " + Num(w.id) +
           ", \"why\": \"no control connection to any server that "
           "answered\"}";
  }
  out += "]}\n";
  return out;
}

}  // namespace ps::tools
