// The inbox ring: how a worker's pushes reach a server without the server
// taking part in the transfer.
//
// Each server gives each worker one inbox: `slots` slots of `slot_bytes`
// (a multiple of 64) in a region the worker may write. Each slot holds an
// InboxSlotHeader (inbox_slot.h: the sequence word, packet number n = 1, 2,
// 3, ... of this inbox, written last; the length) and one sparse packet
// (sparse_packet.h).
//
// Packet n goes into slot (n - 1) mod slots. The server keeps a head h (the
// packets of this inbox it has consumed) and waits for slot h mod slots to
// show sequence h + 1; it validates and applies the packet, then publishes
// h + 1 as the inbox's head word in its status region (status_words.h). A
// worker may write packet n only while n - head <= slots: that is the credit.
// It reads the head word one-sidedly when it runs out.
//
// Why it is safe: a packet is visible only through its sequence word, which
// the transport writes after the data; a worker that dies mid-transfer never
// writes the word, so its partial packet is never applied. An old packet in
// the slot carries an older sequence and is ignored. Garbage with the right
// sequence fails packet validation and is counted and skipped.
#pragma once

#include <cstddef>
#include <cstdint>

#include "protocol/inbox_slot.h"

namespace ps::protocol {

inline constexpr size_t kSlotHeaderBytes = InboxSlotHeader::kBytes;
inline constexpr uint32_t kDefaultInboxSlots = 64;
inline constexpr uint32_t kDefaultSlotBytes = 256 * 1024;

inline uint64_t SlotOffset(uint64_t packet_number, uint32_t slots,
                           uint32_t slot_bytes) {
  return ((packet_number - 1) % slots) * uint64_t{slot_bytes};
}

// Largest packet a slot takes.
inline size_t MaxPacketBytes(uint32_t slot_bytes) {
  return InboxSlotHeader::MaxPacketBytes(slot_bytes);
}

}  // namespace ps::protocol
