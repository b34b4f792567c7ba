// ApplyLoop: the threads that drain the inboxes.
//
// Each inbox has exactly one owner thread (worker w -> thread w mod
// threads), so an inbox's head needs no lock: the owner polls the slot of
// packet head + 1, and when its sequence word shows head + 1 it validates
// the packet, applies it to its table, advances the head and publishes it
// (protocol/inbox_ring.h). Tables are shared between threads; the shard
// makes concurrent applies safe (server/shard.h).
//
// A packet is checked before a single row is touched: length field within
// the slot, header (magic, version, lengths, shard), table known and of the
// packet's kind (rows for HASHED and DENSE, keys for EXACT:
// protocol::PacketIndex), then the full decode (checksum, row bounds, dim,
// finite values) into this thread's own buffers. A keyed packet's keys go to
// the table (table::Table::ApplyKeys), which resolves them to rows. Decoding
// into private buffers first also means a peer that scribbles over the slot
// while we read it can spoil only its own gradient, never our bounds. A bad
// packet is counted, logged once per sender with the reason, and skipped: the
// head moves on.
//
// A table on a device (ps_server --device) decodes on the device instead:
// the packet goes to table::DeviceParamTable::ApplyPacket as it is in the
// slot, which copies it into page-locked memory of its own before it reads
// a byte (the same protection), checks header and checksum there, and
// decodes, validates and applies on the GPU. Its refusals count like the
// host decode's: kPayload for a bad packet, kApply for a CUDA failure.
//
// A lookup packet (protocol/lookup_packet.h) is answered rather than
// applied: copied out of the slot first (the worker may still write there),
// checked (header, checksum, a table that answers lookups, the reply's
// room, keys of this shard), then the keys' rows are read from the table
// (table::Table::ReadKeys, under its locks) into the worker's reply region
// and the request marked answered. A refused lookup is counted and logged
// as a bad packet is, and its refusal written to the reply region, so the
// waiting worker gets the reason instead of a timeout.
//
// Idle policy: poll for `spin_us` (only while packets come within that
// window: server/idle_spin.h), then sleep until a packet rings the
// inboxes' doorbell (server/inboxes.h), so an idle server costs no CPU. With
// several apply threads a ring may be for another thread's inbox, so each
// sleeps at most sleep_min_us, doubling to sleep_max_us while nothing
// arrives, between looks. sleep_max_us 0 spins forever (dedicated cores).
//
// Buffers are sized once for the largest packet a slot can hold, so steady
// applying allocates nothing. They serve host tables only (device tables
// stage packets in their own page-locked lanes), so they stay pageable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "base/status.h"
#include "protocol/inbox_slot.h"
#include "protocol/sparse_packet.h"
#include "server/inboxes.h"
#include "server/server_stats.h"
#include "server/shard.h"

namespace ps::server {

struct IdlePolicy {
  uint32_t spin_us = 50;
  uint32_t sleep_min_us = 50;
  uint32_t sleep_max_us = 200;
};

struct ApplyOptions {
  uint32_t threads = 1;
  IdlePolicy idle;
};

class ApplyLoop {
 public:
  // The pointers must outlive the loop.
  ApplyLoop(Shard* shard, Inboxes* inboxes, ServerStats* stats,
            ApplyOptions options);
  ~ApplyLoop();  // stops (and drains) if still running
  ApplyLoop(const ApplyLoop&) = delete;
  ApplyLoop& operator=(const ApplyLoop&) = delete;

  // Starts the threads (at most one per inbox).
  void Start();
  // Makes the threads apply every packet that is complete in their inboxes,
  // then stop; returns once they have exited.
  void StopAndDrain();

  // Without threads (tests, or a caller that drives the loop itself):
  // applies every complete packet of every inbox on the calling thread.
  // Returns the packets consumed (applied or rejected). Not while the
  // threads run.
  uint64_t DrainOnce();

  uint32_t threads() const { return threads_; }
  // Time apply thread `thread` spent consuming packets (from the first
  // complete packet it saw in an inbox to the end of that inbox's batch),
  // in seconds; any thread may read it (for metrics).
  double BusySeconds(uint32_t thread) const;

 private:
  struct Scratch {
    std::vector<uint32_t> rows;
    std::vector<uint64_t> keys;    // keyed packets (EXACT tables)
    std::vector<uint64_t> hashes;  // theirs, of keys sent as hashes
    std::vector<float> values;
    // Lookups: the packet's copy, and which keys had rows.
    std::vector<uint8_t> packet;
    std::unique_ptr<bool[]> present;
    size_t present_size = 0;
  };
  // Per inbox: the next packet's number minus one. Only its owner thread
  // touches it; padded so two owners never share a line.
  struct alignas(64) InboxCursor {
    uint64_t head = 0;
    std::atomic<uint64_t> busy_ns{0};  // one writer (the owner), relaxed
  };

  void Run(uint32_t thread_index);
  // Sizes `scratch` for the largest packet.
  void Prepare(Scratch* scratch) const;
  // Consumes up to `budget` complete packets of one inbox; returns how many.
  uint32_t Consume(uint32_t worker, uint32_t budget, Scratch* scratch);
  // Validates and applies the packet of `slot`, whose header the caller read
  // once (its sequence showed the packet); returns why it was refused.
  // `lookup`: set when it was a lookup (counted apart from applied packets).
  Status ApplyPacket(uint32_t worker, const uint8_t* slot,
                     const protocol::InboxSlotHeader& slot_header,
                     Scratch* scratch, uint64_t* rows_applied,
                     RejectReason* reason, bool* lookup);
  // A lookup packet of `worker`'s: answered into its reply region, or
  // refused there.
  Status AnswerLookup(uint32_t worker, std::span<const uint8_t> packet,
                      Scratch* scratch, RejectReason* reason);
  Status ReadLookup(std::span<const uint8_t> packet, uint8_t* reply,
                    uint64_t reply_bytes, Scratch* scratch,
                    RejectReason* reason);
  // The rest of ApplyPacket for a keyed packet (an EXACT table's).
  Status ApplyKeyedPacket(std::span<const uint8_t> packet,
                          const protocol::SparsePacketHeader& header,
                          const protocol::SparsePacketExpectations& expect,
                          TableShard& table, Scratch* scratch,
                          uint64_t* rows_applied, RejectReason* reason);

  Shard* const shard_;
  Inboxes* const inboxes_;
  ServerStats* const stats_;
  const ApplyOptions options_;
  const uint32_t threads_;
  const kernels::AccumulateMode mode_;
  std::unique_ptr<InboxCursor[]> cursors_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> running_;
};

}  // namespace ps::server
