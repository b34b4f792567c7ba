// Inboxes: the registered memory workers push into, and the status words
// they read back (layouts in protocol/inbox_ring.h and status_words.h).
//
// One inbox region per worker (slots x slot_bytes, remote-writable), so a
// worker's descriptor grants it exactly its own ring, and one status region
// (remote read, write and atomics: workers read inbox heads and write their
// clocks there). On a server with tables that workers reach only through
// it (EXACT tables), also one lookup reply region per worker, as large as
// its inbox and remote-readable by it alone: the apply thread answers the
// worker's lookup packets there (protocol/lookup_packet.h).
//
// The doorbell: the inbox regions are kNotifyEvents, so every packet's
// PutWithNotify also queues a notification in the context (core/
// notification.h) after the packet is visible. An idle apply thread sleeps
// in WaitForRing instead of polling; a busy one drops the rings it no
// longer needs (ForgetRings) before each poll of its inboxes, so that every
// packet whose ring it dropped is visible to that poll.
//
// Memory ordering: a worker's PutWithNotify stores the slot's sequence word
// with release semantics after the data (shm: a CPU store from the worker's
// process; tcp: our progress thread after receiving the bytes), so
// protocol::InboxSlotHeader::Read loads it with acquire and everything before
// it in the slot is then visible. Heads are published with release stores so a
// worker that sees a head may reuse the slots below it.
//
// Why the inboxes stay pageable on a device server (--device=cuda:N), with
// no flag to page-lock them: it would save no copy. A packet is decoded on
// the device (table::DeviceParamTable::ApplyPacket), so it takes:
//   1. inbox slot -> the table lane's page-locked buffer, the packet's own
//      bytes memcpy'd (compressed: varint indices, fp16/bf16/int8 values);
//   2. header and XXH3 checksum, read from that copy;
//   3. copy -> device: the payload by DMA, then decode and apply there.
// Step 1 is not a staging copy a page-locked inbox could save: the slot
// stays writable by its worker until the head passes it (a TOCTOU window),
// so a packet checked or uploaded straight from the slot could change
// between the checksum and the DMA, and the device would decode bytes
// nobody checked. Copying first into memory only this process writes is
// what makes the checks hold; the device still validates every row and
// value itself before the apply kernel touches the table. And every
// worker's ring (slots x slot_bytes, 16 MiB at the defaults) would be
// locked for nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status_or.h"
#include "core/context.h"
#include "protocol/inbox_ring.h"
#include "protocol/status_words.h"

namespace ps::server {

class Inboxes {
 public:
  // kInvalidArgument for a bad layout (no workers, no slots, slot_bytes not
  // a multiple of 64 or too small for a packet), kResourceExhausted when the
  // memory cannot be allocated. `lookups`: with reply regions (see above).
  static StatusOr<std::unique_ptr<Inboxes>> Create(xfer::Context* context,
                                                   uint32_t workers,
                                                   uint32_t slots,
                                                   uint32_t slot_bytes,
                                                   bool lookups = false);

  uint32_t workers() const { return words_.workers; }
  uint32_t slots() const { return slots_; }
  uint32_t slot_bytes() const { return slot_bytes_; }
  const protocol::StatusWords& status_words() const { return words_; }

  const std::shared_ptr<xfer::MemoryRegion>& inbox_region(
      uint32_t worker) const {
    return inbox_regions_[worker];
  }
  const std::shared_ptr<xfer::MemoryRegion>& status_region() const {
    return status_region_;
  }
  // Null without lookups.
  xfer::MemoryRegion* reply_region(uint32_t worker) const {
    return reply_regions_.empty() ? nullptr : reply_regions_[worker].get();
  }

  // The slot that packet `packet_number` (1-based) of `worker` goes into.
  uint8_t* Slot(uint32_t worker, uint64_t packet_number) const {
    return static_cast<uint8_t*>(inbox_regions_[worker]->data()) +
           protocol::SlotOffset(packet_number, slots_, slot_bytes_);
  }
  // Its header is read through protocol::InboxSlotHeader::Read.

  void PublishHead(uint32_t worker, uint64_t head) {
    __atomic_store_n(Word(words_.InboxHeadOffset(worker)), head,
                     __ATOMIC_RELEASE);
  }
  uint64_t Head(uint32_t worker) const {
    return __atomic_load_n(Word(words_.InboxHeadOffset(worker)),
                           __ATOMIC_ACQUIRE);
  }
  // Packets of `worker` waiting in its inbox (pushed, not yet applied):
  // the slots after the head that hold the next packet numbers. A snapshot
  // for monitoring; any thread.
  uint32_t Pending(uint32_t worker) const {
    const uint64_t head = Head(worker);
    uint32_t n = 0;
    while (n < slots_ && protocol::InboxSlotHeader::Read(
                             Slot(worker, head + n + 1), head + n + 1)
                                 .sequence == head + n + 1) {
      ++n;
    }
    return n;
  }
  uint64_t Clock(uint32_t worker) const {
    return __atomic_load_n(Word(words_.ClockOffset(worker)), __ATOMIC_ACQUIRE);
  }
  // Drops the rings queued so far (each packet rings once). Returns how
  // many.
  uint64_t ForgetRings() {
    uint64_t n = 0;
    while (context_->PollNotification().has_value()) ++n;
    return n;
  }
  // Sleeps until a packet rings or `timeout` passes; true if one rang.
  bool WaitForRing(std::chrono::microseconds timeout) {
    return context_->WaitNotification(timeout).ok();
  }

  // Tells workers that read it that this server is going away.
  void SetShutdown() {
    __atomic_store_n(Word(words_.ShutdownOffset()), uint64_t{1},
                     __ATOMIC_RELEASE);
  }

 private:
  Inboxes() = default;
  uint64_t* Word(uint64_t offset) const {
    return reinterpret_cast<uint64_t*>(
        static_cast<uint8_t*>(status_region_->data()) + offset);
  }

  xfer::Context* context_ = nullptr;  // outlives the inboxes
  protocol::StatusWords words_{0};
  uint32_t slots_ = 0;
  uint32_t slot_bytes_ = 0;
  std::vector<std::shared_ptr<xfer::MemoryRegion>> inbox_regions_;
  std::vector<std::shared_ptr<xfer::MemoryRegion>> reply_regions_;
  std::shared_ptr<xfer::MemoryRegion> status_region_;
};

}  // namespace ps::server
