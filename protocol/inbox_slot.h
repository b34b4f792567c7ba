// The header of one inbox slot (the ring is described in inbox_ring.h): the
// one type through which the worker writes it and the server reads it.
//
//   [0, 8)    sequence  u64: the packet number; the put's notify word,
//                       stored last (with release) by PutWithNotify
//   [8, 12)   length    u32: bytes of the packet that follows
//   [12, 16)  reserved  0
//   [16, 16 + length)   one sparse packet (sparse_packet.h)
//
// The writer sends [8, 16 + length) in one put whose notify word is the
// sequence, so it writes the 8 bytes after the sequence word right in front
// of the packet (into the tail of the packet before it in its buffer, which
// is already sent). The reader reads the header once per packet: the
// sequence with acquire (everything before it in the slot is then visible),
// then the length.
//
// Thread-safety: stateless functions over memory the caller owns; a slot is
// written by one worker and read by one apply thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "base/status.h"

namespace ps::protocol {

struct InboxSlotHeader {
  // The whole header.
  static constexpr size_t kBytes = 16;
  // Where the length field starts: what the writer's put begins with, so
  // also how many bytes of the header precede the packet in that put.
  static constexpr size_t kLengthOffset = 8;
  static constexpr size_t kPrefixBytes = kBytes - kLengthOffset;

  uint64_t sequence = 0;
  uint32_t length = 0;

  // Writer: the header's bytes after the sequence word (length, reserved 0)
  // at `dst`, which is `kPrefixBytes` before the packet.
  static void WritePrefix(uint32_t length, uint8_t* dst) {
    const uint32_t zero = 0;
    std::memcpy(dst, &length, 4);
    std::memcpy(dst + 4, &zero, 4);
  }

  // Reader: the header of `slot`, the sequence loaded with acquire. The
  // length is loaded only when the sequence is `expected` (the packet is
  // there): before that the writer may be writing it, and it is left 0.
  static InboxSlotHeader Read(const uint8_t* slot, uint64_t expected) {
    InboxSlotHeader h;
    h.sequence = __atomic_load_n(reinterpret_cast<const uint64_t*>(slot),
                                 __ATOMIC_ACQUIRE);
    if (h.sequence == expected) {
      h.length = __atomic_load_n(
          reinterpret_cast<const uint32_t*>(slot + kLengthOffset),
          __ATOMIC_RELAXED);
    }
    return h;
  }

  // Largest packet a slot of `slot_bytes` takes.
  static size_t MaxPacketBytes(uint32_t slot_bytes) {
    return slot_bytes - kBytes;
  }

  // OutOfRange when the length field exceeds what a slot of `slot_bytes`
  // can hold (a peer's garbage; the packet must not be read).
  Status Validate(uint32_t slot_bytes) const {
    const size_t max_packet = MaxPacketBytes(slot_bytes);
    if (length > max_packet) {
      return OutOfRange("length field " + std::to_string(length) +
                        " exceeds the slot's packet capacity of " +
                        std::to_string(max_packet) + " bytes");
    }
    return Status::OK();
  }

  // The packet of a validated header read from `slot`.
  std::span<const uint8_t> Packet(const uint8_t* slot) const {
    return std::span<const uint8_t>(slot + kBytes, length);
  }
};

}  // namespace ps::protocol
