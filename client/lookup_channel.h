// LookupChannel: this worker's lookups on one server: the rows of an EXACT
// table's keys, asked for with lookup packets in the worker's inbox and
// read one-sidedly out of its reply region on the server
// (protocol/lookup_packet.h). The server's apply thread for this worker
// resolves the keys; no control message and no serialization is involved,
// and a lookup sees every push this worker wrote into the inbox before it.
//
// A lookup of many keys goes in chunks of at most half the reply region's
// rows, two in flight: while the server answers one chunk, the worker reads
// out and places the rows of the other.
//
// Thread-safe: lookups on one server are serialized (a mutex: the reply
// region is one per worker and server); the inbox writer interleaves their
// packets whole with pushes of other threads.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "client/inbox_writer.h"
#include "core/endpoint.h"

namespace ps::worker {

class LookupChannel {
 public:
  struct Options {
    std::shared_ptr<xfer::Endpoint> endpoint;
    xfer::RemoteRegion reply;      // this worker's reply region on the server
    InboxWriter* inbox = nullptr;  // outlives the channel
    uint32_t worker_id = 0;
    uint32_t shard = 0;
    int timeout_ms = 30000;  // for one chunk's answer
    std::string server;      // for messages
  };

  explicit LookupChannel(Options options);

  // Reads the reply region's answered word: this worker's requests
  // continue from there (a restarted worker never reuses a number).
  Status Start();

  // Reads the rows of `keys` of table `table_id` (`dim` floats each) and
  // writes key j's row at out + positions[j] * dim; a key without a row
  // reads as zeros. Completes when every row is in place. kTimeout when
  // the server answers no chunk within timeout_ms; the server's refusal
  // (unknown table, a key of another shard, ...) as it gave it.
  Status Lookup(uint32_t table_id, uint32_t dim, std::span<const uint64_t> keys,
                std::span<const uint32_t> positions, float* out);

 private:
  // One chunk asked for: keys [first, first + count) of the lookup, in
  // half `half` of the reply region, under requests [first_request,
  // last_request].
  struct Chunk {
    size_t first = 0, count = 0;
    int half = 0;
    uint64_t first_request = 0, last_request = 0;
  };

  uint64_t HalfOffset(int half) const;
  Status Post(uint32_t table_id, size_t row_bytes,
              std::span<const uint64_t> keys, Chunk* chunk);
  // Waits until the chunk is answered; its refusal if it was refused.
  Status WaitAnswered(const Chunk& chunk);
  Status ReadHeader(uint8_t* header);

  const Options options_;
  std::mutex mu_;              // one lookup at a time (the reply region)
  uint64_t next_request_ = 1;  // set by Start
  uint64_t half_bytes_ = 0;    // each half of the reply region's rows
  size_t keys_per_packet_ = 0;
  std::vector<uint8_t> bytes_;  // encoded packets
  std::vector<protocol::EncodedPacket> packets_;
  std::vector<float> rows_;  // one chunk's rows, read out
};

}  // namespace ps::worker
