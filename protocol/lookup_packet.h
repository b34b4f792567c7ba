// The lookup packet and the lookup reply: how a worker reads the rows of a
// table whose server finds a key's row itself (an EXACT table) without the
// control channel.
//
// The worker writes lookup packets into its inbox on the server (the same
// ring, slots and doorbell as its pushes: protocol/inbox_ring.h); the apply
// thread that owns the inbox resolves the keys under the table's locks and
// writes their rows into this worker's reply region on the server (remote
// read, this worker's alone), then stores the packet's request number in
// the region's first word with release. The worker polls that word and
// reads the rows one-sidedly. A worker's packets are consumed in order by
// one thread, so a lookup sees every push the worker wrote before it, and
// the answered word only grows.
//
// Lookup packet, little-endian, no padding:
//
//   offset size field
//        0    4 magic         "PSLK" (0x4b4c5350 read as little-endian u32)
//        4    1 version       kLookupPacketVersion
//        5    3 reserved      0
//        8    8 checksum      XXH3-64 of bytes [16, end) seeded with the u64
//                             at [0, 8), as sparse packets are sealed
//       16    4 table_id
//       20    4 shard_id
//       24    4 sender_id
//       28    4 key_count     >= 1
//       32    8 request       the worker's number for this packet, >= 1,
//                             one more than its previous lookup's
//       40    8 reply_offset  where in the reply region the rows go: a
//                             multiple of 64, >= kLookupReplyHeaderBytes
//       48      keys          key_count x u64, in the order the rows go
//
// Reply region: kLookupReplyHeaderBytes of header, then rows (key_count x
// dim floats of a packet at its reply_offset, in its keys' order; a key
// without a row reads as zeros):
//
//        0    8 answered        request number of the last packet answered
//        8    8 failed_request  request number of the last packet refused
//       16    4 code            its StatusCode
//       20    4 message_bytes   the length of its message
//       24  232 message         why (cut to fit)
//
// A refused packet whose header could be read records its request number,
// code and message before `answered` moves to it; a worker that waited for
// requests [first, last] checks failed_request against that range.
//
// Thread-safety: stateless functions over memory the caller owns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol {

inline constexpr uint32_t kLookupPacketMagic = 0x4b4c5350;  // "PSLK"
inline constexpr uint8_t kLookupPacketVersion = 1;
inline constexpr size_t kLookupPacketHeaderBytes = 48;
inline constexpr size_t kLookupReplyHeaderBytes = 256;
inline constexpr size_t kLookupReplyOffsetAlign = 64;

// Whether `packet` starts with the lookup magic (the apply loop's dispatch:
// a packet is a lookup or a sparse packet).
bool IsLookupPacket(std::span<const uint8_t> packet);

struct LookupMeta {
  uint32_t table_id = 0;
  uint32_t shard_id = 0;
  uint32_t sender_id = 0;
};

// Encodes `keys` into packets of at most `max_packet_bytes` each (listed in
// `packets` as EncodeSparsePackets lists them), packet i numbered
// first_request + i, whose rows go to the reply region back to back from
// `reply_offset` (a multiple of 64; each later packet's rows start at the
// next multiple of 64 after the previous one's) at `row_bytes` per key.
// The first packet starts at `headroom` (a multiple of 8) as in
// EncodeSparsePackets. `out` and `packets` are cleared first.
// kInvalidArgument for no keys, request 0, a misaligned offset or headroom,
// or a packet size too small for one key.
Status EncodeLookupPackets(const LookupMeta& meta,
                           std::span<const uint64_t> keys,
                           uint64_t first_request, uint64_t reply_offset,
                           size_t row_bytes, size_t max_packet_bytes,
                           size_t headroom, std::vector<uint8_t>* out,
                           std::vector<EncodedPacket>* packets);

// The keys one lookup packet of at most `max_packet_bytes` holds.
inline size_t LookupKeysPerPacket(size_t max_packet_bytes) {
  return max_packet_bytes < kLookupPacketHeaderBytes
             ? 0
             : (max_packet_bytes - kLookupPacketHeaderBytes) / 8;
}

// The reply region bytes `key_count` keys of `row_bytes` each take from a
// 64-aligned offset, up to the next 64-aligned offset.
inline uint64_t LookupReplySpan(uint64_t key_count, size_t row_bytes) {
  return (key_count * row_bytes + kLookupReplyOffsetAlign - 1) /
         kLookupReplyOffsetAlign * kLookupReplyOffsetAlign;
}

// A parsed lookup: its keys point into the parsed bytes.
struct LookupRequest {
  LookupMeta meta;
  uint64_t request = 0;
  uint64_t reply_offset = 0;
  std::span<const uint64_t> keys;
};

// The request number of a packet with a lookup header, before anything is
// checked (so that a refusal can be reported to the worker that waits for
// it); 0 when the packet is too short to hold one.
uint64_t UncheckedLookupRequest(std::span<const uint8_t> packet);

// Validates everything but the keys' values: magic, version, reserved
// bytes, the length against key_count, the checksum, key_count >= 1,
// request >= 1, reply_offset aligned and past the header, and the shard.
// `packet` must be 8-byte aligned and stay unchanged while the result is
// used (copy a slot first into memory of one's own). Corruption for damaged
// bytes; kInvalidArgument for a packet for another shard, a version this
// build does not know, or a misaligned packet.
StatusOr<LookupRequest> ParseLookupPacket(std::span<const uint8_t> packet,
                                          uint32_t shard_id);

// Reply header: what the server writes (AnswerLookup) and the worker reads.
struct LookupReplyHeader {
  uint64_t answered = 0;
  uint64_t failed_request = 0;
  Status failure;  // of failed_request

  // The worker's side: the header from a copy of its kLookupReplyHeaderBytes.
  // A copy is not ordered inside itself, so a worker that saw `answered`
  // reach a request reads the header once more (a later read sees all the
  // server wrote before it) to learn whether that request was refused. An
  // unknown code reads as kCorruption.
  static LookupReplyHeader Parse(const uint8_t* bytes);
};

// The server's side: records that `request` was refused for `why`, then
// marks it answered.
void WriteLookupRefusal(uint8_t* reply_region, uint64_t request,
                        const Status& why);
// Marks `request` answered (release): the rows it wrote are visible to a
// reader that sees the word.
void WriteLookupAnswered(uint8_t* reply_region, uint64_t request);

}  // namespace ps::protocol
