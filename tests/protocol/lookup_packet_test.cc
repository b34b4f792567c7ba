// Lookup packets (EXACT tables' pulls through the inboxes): what the encoder
// writes parses back key for key, packet by packet, with the request
// numbers and reply offsets the worker waits on; every damaged field is
// refused with a message that names it; a refusal written into a reply
// header reads back with its code and message.
#include "protocol/lookup_packet.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "protocol/internal/sparse_packet_layout.h"

namespace ps::protocol {
namespace {

constexpr size_t kRowBytes = 12;  // dim 3

std::vector<uint8_t> EncodeOne(std::vector<uint64_t> keys, uint64_t request = 5,
                               uint64_t reply_offset = 256) {
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  LookupMeta meta{.table_id = 7, .shard_id = 1, .sender_id = 2};
  EXPECT_TRUE(EncodeLookupPackets(meta, keys, request, reply_offset, kRowBytes,
                                  4096, 0, &out, &packets)
                  .ok());
  EXPECT_EQ(packets.size(), 1u);
  return out;
}

// Recomputes the checksum after a test changed a byte behind it.
void Reseal(std::vector<uint8_t>* p) {
  internal::StoreU64(p->data() + 8, internal::ChecksumOf(p->data(), p->size()));
}

TEST(LookupPacketTest, PacketsParseBackWithTheirRequestsAndReplyOffsets) {
  std::vector<uint64_t> keys(100);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = ~0ull - i * 7919;
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  LookupMeta meta{.table_id = 7, .shard_id = 1, .sender_id = 2};
  // 48 + 8 * 30 bytes: 30 keys a packet, so four packets; headroom 8.
  ASSERT_TRUE(EncodeLookupPackets(meta, keys, 11, 320, kRowBytes, 48 + 240, 8,
                                  &out, &packets)
                  .ok());
  ASSERT_EQ(packets.size(), 4u);
  EXPECT_EQ(packets[0].offset, 8u);
  uint64_t offset = 320;
  size_t seen = 0;
  for (size_t i = 0; i < packets.size(); ++i) {
    auto r =
        ParseLookupPacket(std::span<const uint8_t>(
                              out.data() + packets[i].offset, packets[i].size),
                          1);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->meta.table_id, 7u);
    EXPECT_EQ(r->meta.sender_id, 2u);
    EXPECT_EQ(r->request, 11 + i);
    EXPECT_EQ(r->reply_offset, offset);
    EXPECT_EQ(r->keys.size(), packets[i].row_count);
    EXPECT_EQ(packets[i].first_row, seen);
    for (size_t j = 0; j < r->keys.size(); ++j) {
      EXPECT_EQ(r->keys[j], keys[seen + j]);
    }
    seen += r->keys.size();
    // Each packet's rows start at the next multiple of 64.
    offset += LookupReplySpan(r->keys.size(), kRowBytes);
    EXPECT_EQ(offset % 64, 0u);
  }
  EXPECT_EQ(seen, keys.size());
}

TEST(LookupPacketTest, TheEncoderRefusesWhatNoServerCouldAnswer) {
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  const std::vector<uint64_t> keys = {1, 2};
  LookupMeta meta;
  EXPECT_EQ(
      EncodeLookupPackets(meta, {}, 1, 256, 4, 4096, 0, &out, &packets).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeLookupPackets(meta, keys, 0, 256, 4, 4096, 0, &out, &packets)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeLookupPackets(meta, keys, 1, 200, 4, 4096, 0, &out, &packets)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      EncodeLookupPackets(meta, keys, 1, 256, 4, 55, 0, &out, &packets).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeLookupPackets(meta, keys, 1, 256, 4, 4096, 4, &out, &packets)
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(LookupPacketTest, EveryDamagedFieldIsRefusedByName) {
  const std::vector<uint8_t> good = EncodeOne({3, 1, 2});
  ASSERT_TRUE(IsLookupPacket(good));
  ASSERT_TRUE(ParseLookupPacket(good, 1).ok());
  EXPECT_EQ(UncheckedLookupRequest(good), 5u);
  struct Case {
    const char* what;
    size_t at;
    uint8_t value;
    bool reseal;
    StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"magic", 0, 'X', true, StatusCode::kCorruption, "magic"},
      {"version", 4, 9, true, StatusCode::kInvalidArgument, "version 9"},
      {"reserved", 6, 1, true, StatusCode::kCorruption, "reserved"},
      {"a key, not resealed", 50, 0xff, false, StatusCode::kCorruption,
       "checksum"},
      {"key count", 28, 4, true, StatusCode::kCorruption, "needs"},
      {"request", 32, 0, true, StatusCode::kCorruption, "request 0"},
      {"reply offset", 40, 8, true, StatusCode::kCorruption, "reply offset"},
      {"shard", 20, 0, true, StatusCode::kInvalidArgument, "shard 0"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> bad = good;
    if (c.at == 32) {
      std::memset(bad.data() + 32, 0, 8);
    } else {
      bad[c.at] = c.value;
    }
    if (c.reseal) Reseal(&bad);
    auto r = ParseLookupPacket(bad, 1);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.what << ": " << r.status();
  }
  // Short packets: no header, and a header without a key.
  EXPECT_EQ(UncheckedLookupRequest(std::span(good.data(), 40)), 0u);
  EXPECT_EQ(ParseLookupPacket(std::span(good.data(), 48), 1).status().code(),
            StatusCode::kCorruption);
  // A packet the caller did not copy to an aligned place.
  std::vector<uint8_t> shifted(good.size() + 4);
  std::memcpy(shifted.data() + 4, good.data(), good.size());
  EXPECT_EQ(ParseLookupPacket(std::span(shifted.data() + 4, good.size()), 1)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // One key cut off: the length disagrees with the count.
  EXPECT_EQ(ParseLookupPacket(std::span(good.data(), good.size() - 8), 1)
                .status()
                .code(),
            StatusCode::kCorruption);
}

TEST(LookupPacketTest, ARefusalReadsBackFromTheReplyHeader) {
  std::vector<uint8_t> reply(kLookupReplyHeaderBytes, 0);
  LookupReplyHeader h = LookupReplyHeader::Parse(reply.data());
  EXPECT_EQ(h.answered, 0u);
  EXPECT_EQ(h.failed_request, 0u);
  WriteLookupAnswered(reply.data(), 3);
  WriteLookupRefusal(
      reply.data(), 4,
      InvalidArgument("table 9 is not " + std::string(300, 'x')));
  WriteLookupAnswered(reply.data(), 5);
  h = LookupReplyHeader::Parse(reply.data());
  EXPECT_EQ(h.answered, 5u);
  EXPECT_EQ(h.failed_request, 4u);
  EXPECT_EQ(h.failure.code(), StatusCode::kInvalidArgument);
  // Cut to the header's room.
  EXPECT_EQ(h.failure.message().size(), kLookupReplyHeaderBytes - 24);
  EXPECT_EQ(h.failure.message().rfind("table 9 is not", 0), 0u);
  // A code this build does not know reads as corruption.
  reply[16] = 200;
  h = LookupReplyHeader::Parse(reply.data());
  EXPECT_EQ(h.failure.code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace ps::protocol
