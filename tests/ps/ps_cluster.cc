#include "tests/ps/ps_cluster.h"

#include <cmath>
#include <sstream>

#include "protocol/table_config.h"

#ifndef PS_SERVER_BIN
#error "PS_SERVER_BIN must name the ps_server binary (set by CMake)"
#endif

namespace ps::testing {

StatusOr<std::unique_ptr<TestCluster>> TestCluster::Start(
    const ClusterOptions& options, const std::string& tag) {
  std::unique_ptr<TestCluster> c(new TestCluster());
  c->options_ = options;
  auto tables = protocol::ParseTableConfig(options.tables);
  if (!tables.ok()) return tables.status().WithContext("test tables");
  c->tables_ = std::move(tables).value();
  PS_ASSIGN_OR_RETURN(c->dir_, ScratchDir::Create(tag));
  PS_ASSIGN_OR_RETURN(std::string tables_path,
                      c->dir_->WriteFile("tables.txt", options.tables));
  for (uint32_t s = 0; s < options.num_servers; ++s) {
    ServerOptions so;
    so.shard_id = s;
    so.num_shards = options.num_servers;
    so.num_workers = options.num_workers;
    so.tables_path = tables_path;
    so.consistency = options.consistency;
    so.staleness = options.staleness;
    so.transport = options.transport;
    so.apply_threads = options.apply_threads;
    so.extra_flags = options.extra_flags;
    PS_ASSIGN_OR_RETURN(
        auto server, ServerProcess::Launch(PS_SERVER_BIN, so, c->dir_->path()));
    c->servers_.push_back(std::move(server));
  }
  for (auto& server : c->servers_) {
    PS_RETURN_IF_ERROR(server->WaitReady());
    c->addresses_.push_back(server->address());
  }
  return c;
}

TestCluster::~TestCluster() {
  // Servers stop in their destructors (SIGTERM, SIGKILL after a timeout).
  servers_.clear();
}

const proto::TableSpec& TestCluster::table(uint32_t id) const {
  for (const auto& t : tables_.table()) {
    if (t.id() == id) return t;
  }
  std::fprintf(stderr, "test bug: no table %u\n", id);
  std::abort();
}

const std::string& TestCluster::dir() const { return dir_->path(); }

Status TestCluster::Stop() {
  std::string failures;
  for (auto& server : servers_) {
    StatusOr<int> code = server->Stop(20000 * SlowdownFactor());
    if (!code.ok() || *code != 0) {
      failures += "\nserver " + server->log_path() + ": " +
                  (code.ok() ? "exit code " + std::to_string(*code)
                             : code.status().ToString()) +
                  "; log tail:\n" + FileTail(server->log_path(), 3000);
    }
  }
  if (!failures.empty())
    return Internal("servers did not stop cleanly:" + failures);
  return Status::OK();
}

StatusOr<std::unique_ptr<worker::PsClient>> ConnectWorker(
    const TestCluster& cluster, uint32_t worker_id) {
  worker::PsClient::Options o;
  o.worker_id = worker_id;
  o.num_workers = cluster.options().num_workers;
  o.servers = cluster.addresses();
  o.xfer.transport = cluster.options().transport;
  o.xfer.peer_timeout_ms = 30000 * SlowdownFactor();
  return worker::PsClient::Connect(o);
}

ExpectedRows::ExpectedRows(const proto::TableSpec& spec, uint32_t shards)
    : map_(protocol::ShardMap::ForTable(spec, shards)), dim_(spec.dim()) {}

void ExpectedRows::Add(uint64_t key, std::span<const float> values,
                       double scale) {
  Row& row = rows_[map_.GlobalRow(key)];
  if (row.value.empty()) {
    row.value.assign(dim_, 0.0);
    row.abs_sum.assign(dim_, 0.0);
  }
  for (uint32_t j = 0; j < dim_; ++j) {
    row.value[j] += scale * values[j];
    row.abs_sum[j] += std::abs(scale * values[j]);
  }
}

void ExpectedRows::AddToRow(uint64_t global_row,
                            std::span<const double> values) {
  Row& row = rows_[global_row];
  if (row.value.empty()) {
    row.value.assign(dim_, 0.0);
    row.abs_sum.assign(dim_, 0.0);
  }
  for (uint32_t j = 0; j < dim_; ++j) {
    row.value[j] += values[j];
    row.abs_sum[j] += std::abs(values[j]);
  }
}

double ExpectedRows::Value(uint64_t key, uint32_t j) const {
  auto it = rows_.find(map_.GlobalRow(key));
  return it == rows_.end() ? 0.0 : it->second.value[j];
}

double ExpectedRows::AbsSum(uint64_t key, uint32_t j) const {
  auto it = rows_.find(map_.GlobalRow(key));
  return it == rows_.end() ? 0.0 : it->second.abs_sum[j];
}

std::string CompareRows(
    const ExpectedRows& expected, std::span<const uint64_t> keys,
    std::span<const float> got,
    const std::function<double(uint64_t key, uint32_t j)>& tolerance) {
  std::ostringstream out;
  size_t mismatches = 0;
  const uint32_t dim = expected.dim();
  if (got.size() != keys.size() * dim) {
    return "pulled " + std::to_string(got.size()) + " floats for " +
           std::to_string(keys.size()) + " keys of dim " + std::to_string(dim);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    for (uint32_t j = 0; j < dim; ++j) {
      double want = expected.Value(keys[i], j);
      double have = got[i * dim + j];
      if (!(std::abs(have - want) <= tolerance(keys[i], j))) {
        if (++mismatches <= 5) {
          out << "key " << keys[i] << " (global row "
              << expected.map().GlobalRow(keys[i]) << ", shard "
              << expected.map().Locate(keys[i]).shard << ") [" << j << "]: got "
              << have << ", want " << want << " (tolerance "
              << tolerance(keys[i], j) << ")\n";
        }
      }
    }
  }
  if (mismatches > 5) out << "... " << mismatches << " mismatches in all\n";
  return out.str();
}

int WaitChild(ChildProcess& child, int timeout_ms) {
  std::optional<int> code = child.Wait(timeout_ms);
  return code ? *code : -1;
}

}  // namespace ps::testing
