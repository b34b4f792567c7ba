// LookupChannel: this worker's lookups on one server: the rows of an EXACT
// table's keys, asked for with lookup packets in the worker's inbox and
// read one-sidedly out of its reply region on the server
// (protocol/lookup_packet.h). The server's apply thread for this worker
// resolves the keys; no control message and no serialization is involved,
// and a lookup sees every push this worker wrote into the inbox before it.
//
// A lookup of many keys goes in chunks of at most half the reply region's
// rows, two in flight: while the server answers one chunk, the worker reads
// out and places the rows of the other. A lookup is begun (Begin) and
// advanced step by step (Ongoing::Advance, or Drive for several), so that
// one thread keeps lookups on several servers in flight at once. A lookup
// may begin before all its keys are known (a pull's keys still sorting):
// it asks for keys as the caller says they are ready (Ongoing::SetReady).
//
// Thread-safe: lookups on one server are serialized (a mutex, held by an
// Ongoing lookup until it is destroyed: the reply region is one per worker
// and server); the inbox writer interleaves their packets whole with pushes
// of other threads. A thread that begins lookups on several channels must
// begin them in one order (ExactPath: by shard), or two such threads could
// each hold a channel the other waits for.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
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

  // One lookup in progress on this channel (from Begin): owns the channel
  // until destroyed. The keys, positions and output given to Begin must
  // outlive it. Not thread-safe: one thread advances it.
  class Ongoing {
   public:
    ~Ongoing();
    Ongoing(const Ongoing&) = delete;
    Ongoing& operator=(const Ongoing&) = delete;

    // Every row is in place.
    bool done() const { return in_flight_ == 0 && posted_ == keys_.size(); }
    // Keys [0, ready) may be asked for (never fewer than before). A lookup
    // begun before its keys were all known (a pull's that are still being
    // sorted) is told as they are; Advance and PostReady ask for them.
    void SetReady(size_t ready) {
      ready_ = std::max(ready_, std::min(ready, keys_.size()));
    }
    // Asks for ready keys while half of the reply region is free: a whole
    // chunk, or what is ready when the server has nothing to answer. No
    // read: cheap to call often.
    Status PostReady();
    // When the server answered the oldest chunk in flight: places its rows
    // and asks for the next chunk, and returns true; false when it has not
    // answered yet (or done()). Asks for ready keys either way (true when
    // it did). kTimeout when the server answered nothing for timeout_ms;
    // the server's refusal as it gave it.
    StatusOr<bool> Advance();

   private:
    friend class LookupChannel;
    // One chunk asked for: keys [first, first + count) of the lookup,
    // under requests [first_request, last_request]; chunks_[h] is the one
    // whose rows go into half h of the reply region.
    struct Chunk {
      size_t first = 0, count = 0;
      uint64_t first_request = 0, last_request = 0;
    };

    Ongoing(LookupChannel* channel, std::unique_lock<std::mutex> lock,
            uint32_t table_id, uint32_t dim, std::span<const uint64_t> keys,
            std::span<const uint32_t> positions, float* out, size_t chunk_keys);
    // Asks for the next ready keys, at most a chunk, into half `half`.
    Status PostNext(int half);
    // The server has timeout_ms from now to answer the oldest chunk.
    void RestartDeadline();

    LookupChannel* const channel_;
    std::unique_lock<std::mutex> lock_;
    const uint32_t table_id_, dim_;
    const std::span<const uint64_t> keys_;
    const std::span<const uint32_t> positions_;
    float* const out_;
    const size_t chunk_keys_;
    Chunk chunks_[2];
    size_t posted_ = 0;  // keys asked for so far
    size_t ready_ = 0;   // keys that may be asked for (SetReady)
    int in_flight_ = 0;  // chunks asked for and not placed yet
    int oldest_ = 0;     // the half of the oldest chunk in flight
    std::chrono::steady_clock::time_point deadline_;  // oldest chunk's answer
  };

  explicit LookupChannel(Options options);

  // Reads the reply region's answered word: this worker's requests
  // continue from there (a restarted worker never reuses a number).
  Status Start();

  // Begins a lookup of the rows of `keys` of table `table_id` (`dim`
  // floats each): waits for the channel (a lookup of another thread), asks
  // for the first chunks and returns; Drive (or the caller) advances it
  // until key j's row is at out + positions[j] * dim (a key without a row
  // reads as zeros); with `positions` empty, at out + j * dim. Refuses empty
  // keys and rows the reply region cannot hold. Advance gives kTimeout when the
  // server answers no chunk within timeout_ms, and the server's refusal
  // (unknown table, a key of another shard, ...) as it gave it. Only keys
  // [0, ready) are asked for until Ongoing::SetReady says more are: the
  // rest of `keys` and `positions` may be written until then.
  StatusOr<std::unique_ptr<Ongoing>> Begin(uint32_t table_id, uint32_t dim,
                                           std::span<const uint64_t> keys,
                                           std::span<const uint32_t> positions,
                                           float* out, size_t ready = SIZE_MAX);

  // Advances every lookup until all are done, sleeping briefly while none
  // is answered: the servers answer theirs at once. The first failure,
  // and the others are abandoned (their channels serve the next lookups).
  static Status Drive(std::span<const std::unique_ptr<Ongoing>> lookups);

 private:
  uint64_t HalfOffset(int half) const;
  // Encodes and posts keys [chunk->first, +count) of a lookup into half
  // `half`, filling in the chunk's request numbers.
  Status Post(uint32_t table_id, size_t row_bytes,
              std::span<const uint64_t> keys, int half, Ongoing::Chunk* chunk);
  Status ReadHeader(uint8_t* header);

  const Options options_;
  std::mutex mu_;  // one lookup at a time (the reply region)
  // Below: used by the lookup that holds mu_.
  uint64_t next_request_ = 1;  // set by Start
  uint64_t half_bytes_ = 0;    // each half of the reply region's rows
  size_t keys_per_packet_ = 0;
  std::vector<uint8_t> bytes_;  // encoded packets
  std::vector<protocol::EncodedPacket> packets_;
  std::vector<float> rows_;  // one chunk's rows, read out
};

}  // namespace ps::worker
