// ExactPath: the push and pull path of one EXACT table, whose server finds
// a key's row itself (table::ExactTable).
//
// Push: the keys of each shard sorted and summed per key, packed into keyed
// sparse packets (protocol/sparse_packet.h): sorted by KeyHash and sent as
// hashes (kKeyHashDeltaVarint) to a server that files keys in that order
// (ClusterInfo.keys_in_hash_order), so that its index is read as a stream;
// sorted by key (kKeyDeltaVarint) to one built before. They are written
// into the worker's inbox on that server, as the other kinds'
// pushes are; the server's apply threads resolve the keys (admission and
// eviction included). A large push goes out in runs of keys as they are
// sorted, so the server applies while the worker still sorts. Push returns once
// the packets are posted: the caller's flush puts them in place
// (ServerGroup::FlushInboxes), and WaitApplied, a bsp Clock or a Barrier waits
// for them to be applied.
//
// Pull: the keys of each shard, in the caller's order, looked up through
// that server's LookupChannel (lookup packets in the same inbox, rows read
// one-sidedly from the worker's reply region: client/lookup_channel.h), so
// a pull sees this worker's earlier pushes once they are applied in order.
// Every shard's lookup is in flight at once, so the servers answer in
// parallel; the call completes when every row is in place. With one
// server the keys go as given, unsplit, and its rows straight into place.
//
// Thread-safe: one push of the table at a time (a mutex: the encode
// buffers are the table's); pulls keep their buffers on the stack and the
// lookup channels serialize lookups per server.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "client/key_order.h"
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
  // One shard's part of a pull: its keys and where each goes in the output.
  struct ShardPull {
    std::vector<uint64_t> keys;
    std::vector<uint32_t> positions;
  };
  // One shard's part of a push: its (key, position) pairs, and its distinct
  // keys, ascending, with their summed gradients, not sent yet; "key" is
  // KeyHash(key) where the shard takes keys in hash order.
  struct ShardPush {
    std::vector<KeyPosition> order;
    std::vector<uint64_t> keys;
    std::vector<float> values;
  };
  // Keys summed before a streamed push sends them: many packets' worth, so
  // that the packets cut at each send are few.
  static constexpr size_t kStreamKeys = size_t{1} << 16;

  Status NonFinite() const;
  // The lookup channel of `shard`, or NotSupported from a server that has
  // none.
  StatusOr<LookupChannel*> LookupsOf(uint32_t shard);
  // Adds the gradients of `sorted` (pairs in key order) to sp's sums.
  void AddSums(std::span<const KeyPosition> sorted,
               std::span<const float> grads, ShardPush* sp) const;
  // Packs sp's sums into keyed packets, writes them into the shard's inbox
  // and clears them.
  Status Send(const protocol::SparsePacketMeta& meta, uint32_t shard,
              ShardPush* sp);

  const proto::TableSpec& spec_;
  const ShardRouter& router_;
  ServerGroup& servers_;
  const WorkerClock& clock_;
  std::mutex push_mu_;  // one push at a time: the buffers below
  std::vector<ShardPush> shards_;
  std::vector<bool> hash_order_;  // per shard: keys_in_hash_order
  std::vector<KeyPosition> sort_scratch_;
  std::vector<uint8_t> bytes_;
  std::vector<protocol::EncodedPacket> packets_;
};

}  // namespace ps::worker
