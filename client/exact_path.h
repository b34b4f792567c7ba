// ExactPath: the push and pull path of one EXACT table, whose server finds
// a key's row itself (table::ExactTable).
//
// Both go in the order the servers file keys (by KeyHash: HashOrder, sorted
// on the client's shared pool) where every server says it takes them so
// (ClusterInfo.keys_in_hash_order): the server then reads its key index,
// and mostly its rows, as streams instead of at random. A cluster with a
// server built before gets keys as given, or sorted by key.
//
// Push: the keys summed per key (a small push's repeats first, in the
// order given) and packed into keyed sparse packets
// (protocol/sparse_packet.h), as hashes (kKeyHashFixedDeltas;
// kKeyHashDeltaVarint or by key, kKeyDeltaVarint, to older servers),
// written into the worker's inbox on
// each server as the other kinds' pushes are; the server's apply threads
// resolve the keys (admission and eviction included). A large push goes
// out in rounds as it is summed, each round about a packet per shard that
// spans 2^kLaneBits stretches of the hashes (so that the server's threads
// share a packet's partitions), while the server applies the rounds before.
// Push returns once the packets are posted: the caller's flush puts them in
// place (ServerGroup::FlushInboxes), and WaitApplied, a bsp Clock or a
// Barrier waits for them to be applied.
//
// Pull: each shard's keys looked up through that server's LookupChannel
// (lookup packets in the same inbox, rows read one-sidedly from the
// worker's reply region: client/lookup_channel.h), so a pull sees this
// worker's earlier pushes once they are applied in order. Every shard's
// lookup is in flight at once, so the servers answer in parallel; the call
// completes when every row is in place. A pull of many keys asks in hash
// order and places each row where its key was (from one server, asking for
// the first keys while the rest still sort); a small one (a training
// step's) asks for each distinct key once, in the caller's order (with one
// server, unsplit, rows straight into place), and copies each row to every
// place its key was.
//
// Thread-safe: one push of the table at a time (a mutex: the encode
// buffers are the table's); a pull takes the table's ordering buffers
// (large) or distinct-key buffers (small) when they are free (else it goes
// in the caller's order, with buffers of its own), and the lookup channels
// serialize lookups per server. The ordering buffers stay sized for the
// largest call: 16 bytes a key of a push, 28 of a pull.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "client/distinct_keys.h"
#include "client/hash_order.h"
#include "client/key_order.h"
#include "client/server_group.h"
#include "client/shard_router.h"
#include "client/shared_pool.h"
#include "client/worker_clock.h"
#include "protocol/ps.pb.h"
#include "protocol/sparse_packet.h"

namespace ps::worker {

class ExactPath {
 public:
  // Everything passed must outlive the path.
  ExactPath(const proto::TableSpec& spec, const ShardRouter& router,
            ServerGroup& servers, const WorkerClock& clock, SharedPool& pool)
      : spec_(spec),
        router_(router),
        servers_(servers),
        clock_(clock),
        pool_(pool) {}

  // Posts the push to the inboxes (see above).
  Status Push(std::span<const uint64_t> keys, std::span<const float> grads);
  // Keys without a row read as zeros. A pull of many keys asks for them in
  // hash order (HashOrder) where every server files keys so, and places
  // each row where its key was.
  Status Pull(std::span<const uint64_t> keys, std::span<float> out);

 private:
  // One shard's part of a pull: its keys and where each goes in the output.
  struct ShardPull {
    std::vector<uint64_t> keys;
    std::vector<uint32_t> positions;
  };
  // One shard's part of a push: its (key, position) pairs (in key order
  // only), and its distinct keys, ascending, with their summed gradients,
  // not sent yet; "key" is KeyHash(key) in hash order.
  struct ShardPush {
    std::vector<KeyPosition> order;
    std::vector<uint64_t> keys;
    std::vector<float> values;
  };
  // Keys summed before a streamed push in key order sends them: many
  // packets' worth, so that the packets cut at each send are few.
  static constexpr size_t kStreamKeys = size_t{1} << 16;
  // A streamed push in hash order sends rounds of one piece from each of
  // 2^kLaneBits lanes (PushInHashOrder).
  static constexpr int kLaneBits = 2;
  static constexpr size_t kLanes = size_t{1} << kLaneBits;
  // Pulls of fewer keys ask for each distinct key once (PullDistinct): a
  // training batch repeats its keys (1,000 examples of a click log's 39
  // fields: 8,525 distinct keys of 39,000), and the server's lookups of
  // them were most of a step's pull. A pull whose keys repeat less than 1
  // in kFewRepeats (fresh ids) pays for finding the repeats and saves
  // little: the next kCallsAsGiven small pulls go as given, then one looks
  // again.
  static constexpr size_t kPullInHashOrderKeys = size_t{1} << 16;
  // Pushes of fewer keys sum each distinct key's gradients first, in the
  // order given (PushDistinct), and sort only the distinct keys by hash:
  // 8,525 of a click log batch's 39,000, where the sort of all 39,000 made
  // the worker's side of a push ~1.3 ms. Pushes of fresh ids, which repeat
  // less than 1 in kFewRepeats, sort all their keys again for the next
  // kCallsAsGiven pushes, as such pulls skip the search for repeats.
  static constexpr size_t kPushDistinctKeys = kPullInHashOrderKeys;
  // While a pull in hash order from one server sorts, the calling thread
  // asks for the keys sorted after each run it sorts, and places the rows
  // answered after every kRunsPerAdvance of them (of HashOrder's 256): a
  // look at the reply region is a round trip over tcp.
  static constexpr int kRunsPerAdvance = 8;
  static constexpr size_t kFewRepeats = 8;
  static constexpr int kCallsAsGiven = 63;

  Status NonFinite() const;
  // A push's two orders (see the file's comment), after Push's checks,
  // in packets of meta.index_encoding (KeyEncoding): they sum each shard's
  // keys, sending pieces as they go when `stream`, and end with SendAll.
  Status PushInHashOrder(std::span<const uint64_t> keys,
                         std::span<const float> grads, bool stream,
                         protocol::SparsePacketMeta meta);
  // A push of fewer than kPushDistinctKeys keys in hash order: each
  // distinct key's gradients summed in the order given, then those sums
  // pushed in hash order.
  Status PushDistinct(std::span<const uint64_t> keys,
                      std::span<const float> grads, bool stream,
                      const protocol::SparsePacketMeta& meta);
  Status PushInKeyOrder(std::span<const uint64_t> keys,
                        std::span<const float> grads, bool stream,
                        protocol::SparsePacketMeta meta);
  // Sends every shard's sums not sent yet; unless `stream`, none was sent,
  // and all are checked to be finite first.
  Status SendAll(bool stream, protocol::SparsePacketMeta meta);
  // How keys go to this table's servers: as hashes of fixed-width deltas
  // when every server decodes those (ClusterInfo.fixed_hash_deltas), as
  // hashes in varints when every server takes hash order
  // (ClusterInfo.keys_in_hash_order), else by key.
  protocol::IndexEncoding KeyEncoding() const;
  // Whether every server takes keys in hash order.
  bool AllTakeHashOrder() const;
  // A pull in hash order (see Pull).
  Status PullInHashOrder(std::span<const uint64_t> keys, std::span<float> out);
  // A pull of keys as given: rows into `out` in the keys' order.
  Status PullAsGiven(std::span<const uint64_t> keys, std::span<float> out);
  // A pull of fewer than kPullInHashOrderKeys keys: each distinct key asked
  // for once (client/distinct_keys.h), as given, its row then copied to
  // every place it was asked for.
  Status PullDistinct(std::span<const uint64_t> keys, std::span<float> out);
  // Adds `key` at `position` to its shard's part of a pull.
  void AddToSplit(uint64_t key, uint32_t position,
                  std::vector<ShardPull>* split) const;
  // Looks up split[s] on server s, every shard's lookup in flight at once;
  // each row goes to out at its key's position.
  Status LookUp(std::span<const ShardPull> split, std::span<float> out);
  // The lookup channel of `shard`, or NotSupported from a server that has
  // none.
  StatusOr<LookupChannel*> LookupsOf(uint32_t shard);
  // Adds the gradients of `sorted` (pairs in key order) to the sums of
  // shard_of(key)'s ShardPush. A pair's second is the key's position in
  // grads or, when `carried`, the bits of its one float (HashOrder).
  template <class ShardOf>
  void AddSums(std::span<const KeyPosition> sorted,
               std::span<const float> grads, bool carried,
               ShardOf shard_of) const;
  // Packs sp's sums into keyed packets, writes them into the shard's inbox
  // and clears them.
  Status Send(const protocol::SparsePacketMeta& meta, uint32_t shard,
              ShardPush* sp);

  const proto::TableSpec& spec_;
  const ShardRouter& router_;
  ServerGroup& servers_;
  const WorkerClock& clock_;
  SharedPool& pool_;
  std::mutex push_mu_;  // one push at a time: the buffers below
  std::vector<ShardPush> shards_;
  std::vector<KeyPosition> sort_scratch_;
  HashOrder push_order_;
  std::vector<uint8_t> bytes_;
  std::vector<protocol::EncodedPacket> packets_;
  // PushDistinct's: pushes to go as given before a look for repeats, the
  // distinct keys (and their table) and their sums.
  int pushes_as_given_ = 0;
  std::vector<uint32_t> push_distinct_table_;
  std::vector<uint64_t> push_distinct_keys_;
  std::vector<float> push_distinct_sums_;
  std::mutex pull_mu_;  // the buffers of a pull in hash order
  HashOrder pull_order_;
  std::vector<ShardPull> pull_split_;
  // PullDistinct's buffers and state: the distinct keys (and their
  // table), each key's index among them, and their rows.
  std::mutex distinct_mu_;
  int pulls_as_given_ = 0;  // small pulls to go as given before a look
  std::vector<uint32_t> distinct_table_;
  std::vector<uint64_t> distinct_keys_;
  std::vector<uint32_t> distinct_of_;
  std::vector<float> distinct_rows_;
};

}  // namespace ps::worker
