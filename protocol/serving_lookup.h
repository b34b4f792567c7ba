// Serving lookups over the one-sided core: how a lookup client and a
// serving replica (serving/lookup_service.h) exchange a batch of keys for
// their rows once the client is attached (ServeHello, protocol/ps.proto).
//
// Request region (the replica's, one per attached client; remote write,
// notify events):
//
//   offset size field
//        0    8 doorbell  the notify word: the request number
//       64      packet    one lookup packet (protocol/lookup_packet.h):
//                         shard_id 0, sender_id 0, reply_offset
//                         kServingReplyHeaderBytes, at most max_keys keys
//
// The client writes the packet with PutWithNotify, the doorbell set to the
// packet's request number (one more than its previous lookup's). The
// replica copies the packet out of the region before it parses it (the
// client may write again at any time), resolves the keys against the
// checkpoint it serves and answers.
//
// Reply region (the client's; remote write), little-endian:
//
//        0    8 answered         the request number answered: the notify
//                                word, stored after everything below
//        8    8 step             of the checkpoint the rows come from
//       16    8 created_unix_ms  when that checkpoint was committed
//       24    4 code             a StatusCode: 0, or why it was refused
//       28    4 missing          keys without a row (EXACT: zeros)
//       32    4 message_bytes    the length of the refusal's message
//       36  220 message          (cut to fit)
//      256      rows             key_count x dim floats, in the keys' order
//
// The replica writes bytes [8, 256 + rows) and the answered word with one
// PutWithNotify, so a client that sees `answered` reach its request reads a
// whole reply. Every reply names the checkpoint its rows come from.
//
// Thread-safety: stateless functions over memory the caller owns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace ps::protocol {

inline constexpr size_t kServingDoorbellOffset = 0;
inline constexpr size_t kServingPacketOffset = 64;
inline constexpr size_t kServingReplyHeaderBytes = 256;
inline constexpr size_t kServingMessageBytes = 220;

// The request region a client of `max_keys` keys a lookup needs.
size_t ServingRequestRegionBytes(uint32_t max_keys);
// The reply region for `max_keys` keys of `max_dim` floats.
size_t ServingReplyRegionBytes(uint32_t max_keys, uint32_t max_dim);

struct ServingReplyHeader {
  uint64_t answered = 0;
  uint64_t step = 0;
  int64_t created_unix_ms = 0;
  Status status;  // OK, or why the request was refused
  uint32_t missing = 0;
};

// Bytes [8, kServingReplyHeaderBytes) of a reply: what follows the
// answered word (which PutWithNotify stores).
void EncodeServingReplyTail(const ServingReplyHeader& h, char* out);
// A header from a copy of a reply's first kServingReplyHeaderBytes bytes. A
// code this build does not know reads as kInternal.
ServingReplyHeader DecodeServingReply(std::span<const char> header);

}  // namespace ps::protocol
