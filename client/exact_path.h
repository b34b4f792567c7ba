// ExactPath: the push and pull path of one EXACT table, whose server finds
// a key's row itself (table::ExactTable).
//
// Push: the keys of each shard sorted and summed per key, packed into keyed
// sparse packets (protocol/sparse_packet.h, IndexEncoding::kKeyDeltaVarint)
// and written into the worker's inbox on that server, as the other kinds'
// pushes are; the server's apply threads resolve the keys (admission and
// eviction included). Push returns once the packets are posted: the
// caller's flush puts them in place (ServerGroup::FlushInboxes), and
// WaitApplied, a bsp Clock or a Barrier waits for them to be applied.
//
// Pull: one ExactPull request per shard over the control channel; the call
// completes when every shard answered.
//
// Thread-safe: one push of the table at a time (a mutex: the encode
// buffers are the table's); pulls only read the table's fixed state, and
// the control channels serialize the requests.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"
#include "client/server_group.h"
#include "client/shard_router.h"
#include "client/worker_clock.h"
#include "protocol/ps.pb.h"
#include "protocol/sparse_packet.h"

namespace ps::worker {

class ExactPath {
 public:
  // Everything passed must outlive the path.
  ExactPath(const proto::TableSpec& spec, const ShardRouter& router,
            ServerGroup& servers, const WorkerClock& clock)
      : spec_(spec), router_(router), servers_(servers), clock_(clock) {}

  // Posts the push to the inboxes (see above).
  Status Push(std::span<const uint64_t> keys, std::span<const float> grads);
  // Keys without a row read as zeros.
  Status Pull(std::span<const uint64_t> keys, std::span<float> out);

 private:
  // One shard's part of a push: its distinct keys, ascending, and their
  // summed gradients.
  struct ShardPush {
    std::vector<std::pair<uint64_t, uint32_t>> order;  // (key, position)
    std::vector<uint64_t> keys;
    std::vector<float> values;
  };

  const proto::TableSpec& spec_;
  const ShardRouter& router_;
  ServerGroup& servers_;
  const WorkerClock& clock_;
  std::mutex push_mu_;  // one push at a time: the buffers below
  std::vector<ShardPush> shards_;
  std::vector<uint8_t> bytes_;
  std::vector<protocol::EncodedPacket> packets_;
};

}  // namespace ps::worker
