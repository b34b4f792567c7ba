// The inbox ring: how a worker's pushes reach a server without the server
// taking part in the transfer.
//
// Each server gives each worker one inbox: `slots` slots of `slot_bytes`
// (a multiple of 64) in a region the worker may write. Slot layout:
//
//   [0, 8)    sequence  u64: packet number n (1, 2, 3, ...) of this inbox;
//                       written LAST, by PutWithNotify, after the bytes below
//   [8, 12)   length    u32: bytes of the packet that follows
//   [12, 16)  reserved  0
//   [16, 16 + length)   one sparse packet (kernels/sparse_packet.h)
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

namespace ps::protocol {

inline constexpr size_t kSlotHeaderBytes = 16;
inline constexpr uint32_t kDefaultInboxSlots = 64;
inline constexpr uint32_t kDefaultSlotBytes = 256 * 1024;

struct SlotHeader {
  uint64_t sequence;
  uint32_t length;
  uint32_t reserved;
};
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

inline uint64_t SlotOffset(uint64_t packet_number, uint32_t slots,
                           uint32_t slot_bytes) {
  return ((packet_number - 1) % slots) * uint64_t{slot_bytes};
}

// Largest packet a slot takes.
inline size_t MaxPacketBytes(uint32_t slot_bytes) {
  return slot_bytes - kSlotHeaderBytes;
}

}  // namespace ps::protocol
