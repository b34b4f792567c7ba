// InboxWriter: puts packets into this worker's inbox on one server (the ring
// of protocol/inbox_ring.h) with credit-based flow control. Packet n goes
// into slot (n - 1) % slots with one PutWithNotify of
// [header prefix, packet] at the slot's length field (protocol/inbox_slot.h)
// whose notify word is the slot's sequence word (value n), so the server sees
// the packet only once it is complete. Packet n may be written only while n -
// head <= slots; the head word is read one-sidedly from the server's status
// region when the cached one gives no credit, and a server that stops consuming
// for `timeout_ms` fails the write with kTimeout (or kPeerLost when its
// endpoint is lost or it announced shutdown).
//
// Thread-safe: writes are serialized per inbox (one mutex), so packets of
// concurrent pushes interleave whole.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "client/client_counters.h"
#include "core/endpoint.h"
#include "protocol/sparse_packet.h"
#include "protocol/status_words.h"

namespace ps::worker {

class InboxWriter {
 public:
  struct Options {
    std::shared_ptr<xfer::Endpoint> endpoint;
    xfer::RemoteRegion inbox;
    xfer::RemoteRegion status;
    protocol::StatusWords words{1};
    uint32_t worker_id = 0;
    uint32_t slots = 0;
    uint32_t slot_bytes = 0;
    int timeout_ms = 30000;
    std::string server;  // for messages: "server 1 (127.0.0.1:7001)"
    // Credit waits are counted here when set (client_counters.h).
    ShardCounters* counters = nullptr;
  };

  explicit InboxWriter(Options options);

  // Reads the server's head: the next packet number continues from there
  // (a restarted worker never reuses a sequence the server consumed).
  Status Start();

  // Writes the packets `packets` of `buffer` (EncodeSparsePackets output),
  // in order. Uses the InboxSlotHeader::kPrefixBytes before each packet (the
  // previous packet's tail, already sent) for the slot header, so `buffer` is
  // clobbered. A first packet with no such room (offset < kPrefixBytes) goes
  // through a staging copy; EncodeSparsePackets' headroom gives it the room.
  Status WritePackets(std::span<uint8_t> buffer,
                      std::span<const protocol::EncodedPacket> packets);

  // Waits until every packet posted so far completed at the server's side
  // (written and visible, not yet applied); returns at once when no packet
  // was posted since the last flush that completed, so that flushing every
  // inbox waits only on the servers a call wrote to.
  Status Flush();
  // Waits until the server consumed (applied) every packet written so far.
  Status WaitApplied();

  // Packets written so far.
  uint64_t written() const;
  size_t max_packet_bytes() const;

 private:
  Status WriteOne(uint8_t* with_header, size_t packet_bytes);
  Status WaitForCredit(uint64_t n);
  Status ReadHead(uint64_t* head);

  const Options options_;
  mutable std::mutex mu_;
  uint64_t next_ = 1;         // the next packet number
  uint64_t cached_head_ = 0;  // the server's head as last read
  // Packets up to this number are posted (next_ - 1, for Flush to read
  // without mu_), and every packet up to flushed_through_ completed (a
  // flush returned after it was posted).
  std::atomic<uint64_t> posted_through_{0};
  std::atomic<uint64_t> flushed_through_{0};
  std::vector<uint8_t> staging_;
};

}  // namespace ps::worker
