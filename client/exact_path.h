// ExactPath: the push and pull path of one EXACT table. Its rows go through
// the server that keeps the key index (ExactPush / ExactPull over the
// control channel), one request per shard; pushes are summed per key first,
// as for the other kinds. Each call completes when every shard answered:
// a push is then applied, not only received.
//
// Thread-safe: calls only read the table's fixed state; the control
// channels serialize the requests.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "client/server_group.h"
#include "client/shard_router.h"
#include "client/worker_clock.h"
#include "protocol/ps.pb.h"

namespace ps::worker {

class ExactPath {
 public:
  // Everything passed must outlive the path.
  ExactPath(const proto::TableSpec& spec, const ShardRouter& router,
            ServerGroup& servers, const WorkerClock& clock)
      : spec_(spec), router_(router), servers_(servers), clock_(clock) {}

  Status Push(std::span<const uint64_t> keys, std::span<const float> grads);
  // Keys without a row read as zeros.
  Status Pull(std::span<const uint64_t> keys, std::span<float> out);

 private:
  const proto::TableSpec& spec_;
  const ShardRouter& router_;
  ServerGroup& servers_;
  const WorkerClock& clock_;
};

}  // namespace ps::worker
