// A cluster of real ps_server processes for integration tests, plus what the
// worker processes of a test share: connecting a PsClient, and the exact
// expected content of table rows.
//
//   auto cluster = TestCluster::Start({.num_servers = 2, .num_workers = 3,
//                                      .tables = kTables}, "bsp").value();
//   ChildProcess w0 = ChildProcess::Start("worker-0", [&](LineChannel& ch) {
//     auto client = ConnectWorker(*cluster, 0).value();  // in the child
//     ...
//   });
//   ...
//   EXPECT_TRUE(cluster->Stop().ok());   // every server exits 0 on SIGTERM
//
// Fork rule: worker children are forked from the test process while it has
// no thread of its own (no PsClient or xfer Context alive in the parent);
// servers are separate programs (fork + exec), so they may start any time.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "client/ps_client.h"
#include "protocol/shard_map.h"
#include "tests/core/process_harness.h"
#include "tests/ps/server_process.h"

namespace ps::testing {

// Every cluster test runs once per transport, named ".../shm" and ".../tcp"
// (tests/ps/CMakeLists.txt registers each with a gtest filter on that name):
//   INSTANTIATE_TEST_SUITE_P(Transports, MyTest, ClusterTransports(),
//                            TransportParamName());
inline auto ClusterTransports() {
  return ::testing::Values(xfer::TransportChoice::kShm,
                           xfer::TransportChoice::kTcp);
}
struct TransportParamName {
  std::string operator()(
      const ::testing::TestParamInfo<xfer::TransportChoice>& info) const {
    return TransportFlag(info.param);
  }
};

struct ClusterOptions {
  uint32_t num_servers = 2;
  uint32_t num_workers = 3;
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 2;
  xfer::TransportChoice transport = xfer::TransportChoice::kShm;
  uint32_t apply_threads = 2;
  std::string tables;  // text-format TableConfig
  std::vector<std::string> extra_flags;
};

class TestCluster {
 public:
  static StatusOr<std::unique_ptr<TestCluster>> Start(
      const ClusterOptions& options, const std::string& tag);
  ~TestCluster();

  const ClusterOptions& options() const { return options_; }
  // Control addresses in shard order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  ServerProcess& server(uint32_t shard) { return *servers_[shard]; }
  const proto::TableConfig& tables() const { return tables_; }
  const proto::TableSpec& table(uint32_t id) const;
  const std::string& dir() const;

  // SIGTERMs every server and waits; OK only if each exited 0 in time (a
  // sanitizer report in a server makes its exit code non-zero). The message
  // lists each failure with the end of that server's log.
  Status Stop();

 private:
  TestCluster() = default;
  ClusterOptions options_;
  proto::TableConfig tables_;
  std::unique_ptr<ScratchDir> dir_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<std::string> addresses_;
};

// Connects worker `worker_id` of the cluster with the cluster's transport.
StatusOr<std::unique_ptr<worker::PsClient>> ConnectWorker(
    const TestCluster& cluster, uint32_t worker_id);

// The exact content of the rows of one HASHED or DENSE table that starts at
// zeros, accumulated in double by global row, so keys that hash to one row
// add up as they do on the server.
class ExpectedRows {
 public:
  ExpectedRows(const proto::TableSpec& spec, uint32_t shards);
  uint32_t dim() const { return dim_; }
  // row(key) += scale * values (dim values).
  void Add(uint64_t key, std::span<const float> values, double scale = 1.0);
  // Adds to a global row directly (what a hand-made packet does).
  void AddToRow(uint64_t global_row, std::span<const double> values);
  // Current expectation for key's row, element j; and the sum of |added|
  // (for error bounds of quantized pushes).
  double Value(uint64_t key, uint32_t j) const;
  double AbsSum(uint64_t key, uint32_t j) const;
  const protocol::ShardMap& map() const { return map_; }

 private:
  struct Row {
    std::vector<double> value, abs_sum;
  };
  protocol::ShardMap map_;
  uint32_t dim_;
  std::map<uint64_t, Row> rows_;
};

// Compares pulled rows (keys.size() x dim) with `expected`: |got - want| <=
// tolerance(key, j). Returns "" when all match, else the first few
// mismatches, one per line.
std::string CompareRows(
    const ExpectedRows& expected, std::span<const uint64_t> keys,
    std::span<const float> got,
    const std::function<double(uint64_t key, uint32_t j)>& tolerance);

// Waits up to `timeout_ms` for the child to exit; its exit code or -1.
int WaitChild(ChildProcess& child, int timeout_ms);

// Prints a non-OK status in a child body and returns 1 from it.
#define PS_CHILD_OK(expr)                                                   \
  do {                                                                      \
    ::ps::Status _ps_child_status = (expr);                                 \
    if (!_ps_child_status.ok()) {                                           \
      std::fprintf(stderr, "[child %d] %s:%d: %s failed: %s\n",             \
                   static_cast<int>(::getpid()), __FILE__, __LINE__, #expr, \
                   _ps_child_status.ToString().c_str());                    \
      std::fflush(stderr);                                                  \
      return 1;                                                             \
    }                                                                       \
  } while (0)

// PS_CHILD_ASSIGN(auto client, ConnectWorker(cluster, 0)); in a child body.
#define PS_CHILD_ASSIGN(lhs, expr)                                 \
  auto PS_STATUS_CONCAT(_ps_child_or_, __LINE__) = (expr);         \
  PS_CHILD_OK(PS_STATUS_CONCAT(_ps_child_or_, __LINE__).status()); \
  lhs = std::move(PS_STATUS_CONCAT(_ps_child_or_, __LINE__)).value()

}  // namespace ps::testing
