#include "protocol/lookup_packet.h"

#include <algorithm>
#include <cstring>

#include "kernels/checksum.h"
#include "protocol/internal/sparse_packet_layout.h"

namespace ps::protocol {
namespace {

using internal::LoadU32;
using internal::LoadU64;
using internal::StoreU32;
using internal::StoreU64;

constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffReserved = 5,
                 kOffChecksum = 8, kOffTable = 16, kOffShard = 20,
                 kOffSender = 24, kOffCount = 28, kOffRequest = 32,
                 kOffReplyOffset = 40;
constexpr size_t kReplyOffAnswered = 0, kReplyOffFailed = 8, kReplyOffCode = 16,
                 kReplyOffMessageBytes = 20, kReplyOffMessage = 24;
constexpr size_t kMaxMessageBytes = kLookupReplyHeaderBytes - kReplyOffMessage;

}  // namespace

bool IsLookupPacket(std::span<const uint8_t> packet) {
  return packet.size() >= 4 && LoadU32(packet.data()) == kLookupPacketMagic;
}

Status EncodeLookupPackets(const LookupMeta& meta,
                           std::span<const uint64_t> keys,
                           uint64_t first_request, uint64_t reply_offset,
                           size_t row_bytes, size_t max_packet_bytes,
                           size_t headroom, std::vector<uint8_t>* out,
                           std::vector<EncodedPacket>* packets) {
  out->clear();
  packets->clear();
  if (keys.empty()) return InvalidArgument("a lookup of no keys");
  if (first_request == 0) return InvalidArgument("lookup request 0");
  if (reply_offset % kLookupReplyOffsetAlign != 0 ||
      reply_offset < kLookupReplyHeaderBytes) {
    return InvalidArgument("lookup reply offset " +
                           std::to_string(reply_offset) +
                           " is not a multiple of 64 past the reply header");
  }
  if (headroom % 8 != 0) return InvalidArgument("headroom not a multiple of 8");
  const size_t per_packet = LookupKeysPerPacket(max_packet_bytes);
  if (per_packet == 0) {
    return InvalidArgument("lookup packets of " +
                           std::to_string(max_packet_bytes) +
                           " bytes cannot hold a key");
  }
  const size_t count = (keys.size() + per_packet - 1) / per_packet;
  out->resize(headroom + count * kLookupPacketHeaderBytes + keys.size() * 8);
  size_t at = headroom;
  for (size_t first = 0; first < keys.size(); first += per_packet) {
    const size_t n = std::min(per_packet, keys.size() - first);
    uint8_t* p = out->data() + at;
    StoreU32(p + kOffMagic, kLookupPacketMagic);
    p[kOffVersion] = kLookupPacketVersion;
    std::memset(p + kOffReserved, 0, 3);
    StoreU32(p + kOffTable, meta.table_id);
    StoreU32(p + kOffShard, meta.shard_id);
    StoreU32(p + kOffSender, meta.sender_id);
    StoreU32(p + kOffCount, static_cast<uint32_t>(n));
    const uint64_t request = first_request + packets->size();
    StoreU64(p + kOffRequest, request);
    StoreU64(p + kOffReplyOffset, reply_offset);
    std::memcpy(p + kLookupPacketHeaderBytes, keys.data() + first, n * 8);
    const size_t size = kLookupPacketHeaderBytes + n * 8;
    StoreU64(p + kOffChecksum, internal::ChecksumOf(p, size));
    packets->push_back(EncodedPacket{.offset = at,
                                     .size = size,
                                     .first_row = first,
                                     .row_count = static_cast<uint32_t>(n)});
    at += size;
    reply_offset += LookupReplySpan(n, row_bytes);
  }
  return Status::OK();
}

uint64_t UncheckedLookupRequest(std::span<const uint8_t> packet) {
  if (packet.size() < kLookupPacketHeaderBytes) return 0;
  return LoadU64(packet.data() + kOffRequest);
}

StatusOr<LookupRequest> ParseLookupPacket(std::span<const uint8_t> packet,
                                          uint32_t shard_id) {
  if (packet.size() < kLookupPacketHeaderBytes + 8) {
    return Corruption("lookup packet of " + std::to_string(packet.size()) +
                      " bytes is shorter than a header and one key");
  }
  const uint8_t* p = packet.data();
  if (reinterpret_cast<uintptr_t>(p) % alignof(uint64_t) != 0) {
    return InvalidArgument("lookup packet not 8-byte aligned (copy it first)");
  }
  if (LoadU32(p + kOffMagic) != kLookupPacketMagic) {
    return Corruption("not a lookup packet (bad magic)");
  }
  if (p[kOffVersion] != kLookupPacketVersion) {
    return InvalidArgument(
        "lookup packet version " + std::to_string(p[kOffVersion]) +
        " (this build: " + std::to_string(kLookupPacketVersion) + ")");
  }
  if (p[kOffReserved] != 0 || p[kOffReserved + 1] != 0 ||
      p[kOffReserved + 2] != 0) {
    return Corruption("lookup packet with nonzero reserved bytes");
  }
  const uint32_t count = LoadU32(p + kOffCount);
  if (count == 0) return Corruption("lookup packet of 0 keys");
  const uint64_t expected_bytes =
      kLookupPacketHeaderBytes + uint64_t{count} * 8;
  if (expected_bytes != packet.size()) {
    return Corruption("lookup packet of " + std::to_string(count) +
                      " keys needs " + std::to_string(expected_bytes) +
                      " bytes, has " + std::to_string(packet.size()));
  }
  const uint64_t sum = LoadU64(p + kOffChecksum);
  if (sum != internal::ChecksumOf(p, packet.size())) {
    return Corruption("lookup packet checksum mismatch");
  }
  LookupRequest r;
  r.meta.table_id = LoadU32(p + kOffTable);
  r.meta.shard_id = LoadU32(p + kOffShard);
  r.meta.sender_id = LoadU32(p + kOffSender);
  r.request = LoadU64(p + kOffRequest);
  r.reply_offset = LoadU64(p + kOffReplyOffset);
  if (r.request == 0) return Corruption("lookup packet with request 0");
  if (r.reply_offset % kLookupReplyOffsetAlign != 0 ||
      r.reply_offset < kLookupReplyHeaderBytes) {
    return Corruption("lookup reply offset " + std::to_string(r.reply_offset) +
                      " is not a multiple of 64 past the reply header");
  }
  if (r.meta.shard_id != shard_id) {
    return InvalidArgument("lookup packet for shard " +
                           std::to_string(r.meta.shard_id) + " reached shard " +
                           std::to_string(shard_id));
  }
  r.keys = std::span<const uint64_t>(
      reinterpret_cast<const uint64_t*>(p + kLookupPacketHeaderBytes), count);
  return r;
}

LookupReplyHeader LookupReplyHeader::Parse(const uint8_t* bytes) {
  LookupReplyHeader h;
  h.answered = LoadU64(bytes + kReplyOffAnswered);
  h.failed_request = LoadU64(bytes + kReplyOffFailed);
  if (h.failed_request == 0) return h;
  const uint32_t code = LoadU32(bytes + kReplyOffCode);
  const uint32_t length =
      std::min<uint32_t>(LoadU32(bytes + kReplyOffMessageBytes),
                         static_cast<uint32_t>(kMaxMessageBytes));
  std::string message(reinterpret_cast<const char*>(bytes + kReplyOffMessage),
                      length);
  if (code == 0 || code > static_cast<uint32_t>(kLastStatusCode)) {
    h.failure = Corruption("lookup refused with unknown code " +
                           std::to_string(code) + ": " + message);
  } else {
    h.failure = Status(static_cast<StatusCode>(code), std::move(message));
  }
  return h;
}

void WriteLookupRefusal(uint8_t* reply_region, uint64_t request,
                        const Status& why) {
  const std::string& message = why.message();
  const size_t length = std::min(message.size(), kMaxMessageBytes);
  StoreU32(reply_region + kReplyOffCode, static_cast<uint32_t>(why.code()));
  StoreU32(reply_region + kReplyOffMessageBytes, static_cast<uint32_t>(length));
  std::memcpy(reply_region + kReplyOffMessage, message.data(), length);
  StoreU64(reply_region + kReplyOffFailed, request);
  WriteLookupAnswered(reply_region, request);
}

void WriteLookupAnswered(uint8_t* reply_region, uint64_t request) {
  __atomic_store_n(
      reinterpret_cast<uint64_t*>(reply_region + kReplyOffAnswered), request,
      __ATOMIC_RELEASE);
}

}  // namespace ps::protocol
