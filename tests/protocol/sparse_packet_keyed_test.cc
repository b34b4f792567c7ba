// Keyed sparse packets (IndexEncoding::kKeyDeltaVarint): round trips of any
// uint64 keys per value type, cutting into packets, the refusals of encoder
// and decoder, and that the two kinds never pass for each other. Also that
// packets of rows are the bytes they were before keyed packets existed.
// Keys sent as their hashes (kKeyHashDeltaVarint, kKeyHashFixedDeltas)
// decode to the keys and their hashes, and KeyFromHash undoes KeyHash;
// fixed deltas take the fewest bytes their largest needs, and malformed
// ones (width, length, order, past 2^64) are refused.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "protocol/key_hash.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol {
namespace {

using kernels::RoundTrip;

constexpr ValueType kTypes[] = {ValueType::kFp32, ValueType::kFp16,
                                ValueType::kBf16, ValueType::kInt8};

SparsePacketMeta Meta(ValueType type, uint32_t dim) {
  return SparsePacketMeta{.table_id = 4,
                          .shard_id = 1,
                          .sender_id = 2,
                          .step = 77,
                          .row_dim = dim,
                          .value_type = type,
                          .index_encoding = IndexEncoding::kKeyDeltaVarint,
                          .int8_block = 8};
}

SparsePacketExpectations Keyed(uint32_t dim) {
  return SparsePacketExpectations{.row_dim = dim,
                                  .table_id = 4,
                                  .shard_id = 1,
                                  .index = PacketIndex::kKeys};
}

// Sorted distinct keys over the whole uint64 range, the extremes included.
std::vector<uint64_t> Keys(size_t n, std::mt19937_64& rng) {
  std::set<uint64_t> keys = {0, ~0ull};
  while (keys.size() < n) keys.insert(rng() >> (rng() % 64));
  std::vector<uint64_t> sorted(keys.begin(), keys.end());
  sorted.resize(n);
  return sorted;
}

struct Decoded {
  std::vector<uint64_t> keys;
  std::vector<float> values;
};

Decoded DecodeAll(const std::vector<uint8_t>& out,
                  const std::vector<EncodedPacket>& packets, uint32_t dim) {
  Decoded d;
  for (const EncodedPacket& pk : packets) {
    std::span<const uint8_t> bytes(out.data() + pk.offset, pk.size);
    auto h = ParseSparsePacketHeader(bytes, Keyed(dim));
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) return d;
    std::vector<uint64_t> keys(h->row_count);
    std::vector<float> values(size_t{h->row_count} * dim);
    Status s = DecodeKeyedPacket(bytes, *h, Keyed(dim), keys, values);
    EXPECT_TRUE(s.ok()) << s;
    d.keys.insert(d.keys.end(), keys.begin(), keys.end());
    d.values.insert(d.values.end(), values.begin(), values.end());
  }
  return d;
}

TEST(KeyedPacketTest, RoundTripsAnyKeysEveryTypeAndPacketSize) {
  std::mt19937_64 rng(11);
  for (ValueType type : kTypes) {
    for (uint32_t dim : {1u, 4u, 16u}) {
      for (size_t n : {1u, 2u, 100u, 3000u}) {
        for (size_t max_bytes : {size_t{256}, size_t{1} << 16}) {
          const std::vector<uint64_t> keys = Keys(n, rng);
          std::vector<float> values(n * dim);
          for (size_t i = 0; i < values.size(); ++i) {
            values[i] = static_cast<float>(i % 97) * 0.25f - 7.0f;
          }
          std::vector<uint8_t> out;
          std::vector<EncodedPacket> packets;
          Status s = EncodeKeyedPackets(Meta(type, dim), keys, values,
                                        max_bytes, &out, &packets);
          if (!s.ok()) {
            // Only a slot too small for one whole int8 block may refuse.
            EXPECT_EQ(type, ValueType::kInt8) << s;
            continue;
          }
          ASSERT_FALSE(packets.empty());
          for (const EncodedPacket& pk : packets) EXPECT_LE(pk.size, max_bytes);
          const Decoded d = DecodeAll(out, packets, dim);
          EXPECT_EQ(d.keys, keys);
          std::vector<float> expected(values.size());
          RoundTrip(type, values.data(), values.size(), 8, expected.data());
          EXPECT_EQ(d.values, expected);
        }
      }
    }
  }
}

TEST(KeyedPacketTest, TheEncoderRefusesUnsortedKeysAndBadSizes) {
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  const auto meta = Meta(ValueType::kFp32, 1);
  EXPECT_TRUE(EncodeKeyedPackets(meta, std::vector<uint64_t>{5, 5},
                                 std::vector<float>{1, 2}, 4096, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(EncodeKeyedPackets(meta, std::vector<uint64_t>{9, 5},
                                 std::vector<float>{1, 2}, 4096, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(EncodeKeyedPackets(meta, std::vector<uint64_t>{1, 2},
                                 std::vector<float>{1}, 4096, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(EncodeKeyedPackets(meta, std::vector<uint64_t>{1},
                                 std::vector<float>{1}, 60, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));  // no room for a key
  EXPECT_TRUE(out.empty());
  // The row encoder does not write keyed packets.
  EXPECT_TRUE(EncodeSparsePackets(meta, std::vector<uint32_t>{1},
                                  std::vector<float>{1}, 4096, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
}

// One keyed packet of keys {1, 300} (dim 1, fp32), as bytes.
std::vector<uint8_t> TwoKeyPacket() {
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  EXPECT_TRUE(EncodeKeyedPackets(
                  Meta(ValueType::kFp32, 1), std::vector<uint64_t>{1, 300},
                  std::vector<float>{0.5f, -2.0f}, 4096, &out, &packets)
                  .ok());
  return out;
}

// Rewrites the checksum after a change, so the check behind it runs.
void Reseal(std::vector<uint8_t>* p) {
  uint64_t seed;
  std::memcpy(&seed, p->data(), 8);
  const uint64_t sum =
      XXH3_64bits_withSeed(p->data() + 16, p->size() - 16, seed);
  std::memcpy(p->data() + 8, &sum, 8);
}

Status Decode(const std::vector<uint8_t>& p,
              PacketIndex index = PacketIndex::kKeys) {
  SparsePacketExpectations ex = Keyed(1);
  ex.index = index;
  auto h = ParseSparsePacketHeader(p, ex);
  if (!h.ok()) return h.status();
  std::vector<uint64_t> keys(h->row_count);
  std::vector<float> values(h->row_count);
  return DecodeKeyedPacket(p, *h, ex, keys, values);
}

TEST(KeyedPacketTest, TheDecoderRefusesBadKeySections) {
  const std::vector<uint8_t> good = TwoKeyPacket();
  ASSERT_TRUE(Decode(good).ok());
  // Index section at 56: varint 1, then delta 299 = 0xab 0x02; index_bytes 3.
  ASSERT_EQ(good[56], 1);
  {
    std::vector<uint8_t> p = good;  // delta 0: the same key twice
    p[57] = 0x80;
    p[58] = 0x00;
    Reseal(&p);
    EXPECT_FALSE(Decode(p).ok());
  }
  {
    std::vector<uint8_t> p = good;  // the last varint runs past the section
    p[58] = 0x82;
    Reseal(&p);
    EXPECT_TRUE(Decode(p).Is(StatusCode::kCorruption));
  }
  {
    std::vector<uint8_t> p = good;  // delta 0 after the first key
    p[57] = 0x00;
    p[58] = 0x00;  // and padding-like trailing byte inside the section
    Reseal(&p);
    EXPECT_FALSE(Decode(p).ok());
  }
  {
    std::vector<uint8_t> p = good;  // a flipped byte without a new checksum
    p[57] ^= 1;
    EXPECT_TRUE(Decode(p).Is(StatusCode::kCorruption));
  }
}

// Varints are read eight bytes at a time where eight bytes of the section
// are left, byte by byte near its end: an over-long varint (a last byte of
// 0) is Corruption either way.
TEST(KeyedPacketTest, OverLongVarintsAreCorruptionWhereverTheyLie) {
  // Keys 128, 128 + 2^40, 128 + 2^41: varints of 2, 6 and 6 bytes.
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  const uint64_t base = 128;
  ASSERT_TRUE(
      EncodeKeyedPackets(Meta(ValueType::kFp32, 1),
                         std::vector<uint64_t>{base, base + (uint64_t{1} << 40),
                                               base + (uint64_t{1} << 41)},
                         std::vector<float>{1, 2, 3}, 4096, &out, &packets)
          .ok());
  ASSERT_TRUE(Decode(out).ok());
  ASSERT_EQ(out[56], 0x80);  // 128: 0x80 0x01, with 12 bytes after it
  ASSERT_EQ(out[57], 0x01);
  {
    std::vector<uint8_t> p = out;  // 0x80 0x00: zero, over-long
    p[57] = 0x00;
    Reseal(&p);
    EXPECT_TRUE(Decode(p).Is(StatusCode::kCorruption));
  }
  {
    // The last varint (2^40, 6 bytes ending the section) made to end in a
    // zero byte: read byte by byte, also Corruption.
    std::vector<uint8_t> p = out;
    ASSERT_EQ(p[56 + 13], 0x20);  // 2^40 = 0x20 << 35
    p[56 + 12] &= 0x7f;
    p[56 + 13] = 0x00;
    Reseal(&p);
    EXPECT_TRUE(Decode(p).Is(StatusCode::kCorruption));
  }
}

TEST(KeyedPacketTest, KeysPast64BitsAreCorruption) {
  // Keys {~0 - 1, ~0}: the second delta is 1; make it 2, past 2^64.
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  ASSERT_TRUE(EncodeKeyedPackets(Meta(ValueType::kFp32, 1),
                                 std::vector<uint64_t>{~0ull - 1, ~0ull},
                                 std::vector<float>{1, 2}, 4096, &out, &packets)
                  .ok());
  ASSERT_EQ(out[56 + 10], 1);  // a 10-byte first varint, then delta 1
  out[56 + 10] = 2;
  Reseal(&out);
  EXPECT_TRUE(Decode(out).Is(StatusCode::kCorruption));
}

TEST(KeyedPacketTest, TheKindsNeverPassForEachOther) {
  const std::vector<uint8_t> keyed = TwoKeyPacket();
  EXPECT_TRUE(
      Decode(keyed, PacketIndex::kRows).Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(Decode(keyed, PacketIndex::kAny).ok());
  std::vector<uint32_t> rows(2);
  std::vector<float> values(2);
  SparsePacketExpectations rows_expect{.table_rows = 1000, .row_dim = 1};
  EXPECT_TRUE(DecodeSparsePacket(keyed, rows_expect, rows, values, nullptr)
                  .Is(StatusCode::kInvalidArgument));
  // Not even by a caller that admits both kinds.
  SparsePacketExpectations rows_or_keys = rows_expect;
  rows_or_keys.index = PacketIndex::kAny;
  auto keyed_header = ParseSparsePacketHeader(keyed, rows_or_keys);
  ASSERT_TRUE(keyed_header.ok());
  EXPECT_TRUE(
      DecodeSparsePacket(keyed, *keyed_header, rows_or_keys, rows, values)
          .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(DecodeSparsePacketRows(
                  keyed, rows_or_keys, [](uint32_t, const float*) {}, nullptr)
                  .Is(StatusCode::kInvalidArgument));
  // A packet of rows is not decoded as keys.
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  SparsePacketMeta meta = Meta(ValueType::kFp32, 1);
  meta.index_encoding = IndexEncoding::kDeltaVarint;
  ASSERT_TRUE(EncodeSparsePackets(meta, std::vector<uint32_t>{1, 300},
                                  std::vector<float>{0.5f, -2.0f}, 4096, &out,
                                  &packets)
                  .ok());
  EXPECT_TRUE(Decode(out).Is(StatusCode::kInvalidArgument));
  SparsePacketExpectations any = Keyed(1);
  any.index = PacketIndex::kAny;
  auto h = ParseSparsePacketHeader(out, any);
  ASSERT_TRUE(h.ok());
  std::vector<uint64_t> keys(2);
  EXPECT_TRUE(DecodeKeyedPacket(out, *h, any, keys, values)
                  .Is(StatusCode::kInvalidArgument));
}

// Packets of rows are what they were before keyed packets existed: the
// XXH3-64 of whole packets written by the encoder of main at c57f0a1.
TEST(KeyedPacketTest, PacketsOfRowsAreUnchanged) {
  struct Case {
    ValueType type;
    IndexEncoding encoding;
    uint64_t hash;
  };
  const Case cases[] = {
      {ValueType::kFp32, IndexEncoding::kDeltaVarint, 0xeb12382538752c75ull},
      {ValueType::kFp16, IndexEncoding::kDeltaVarint, 0x019628435597f3f1ull},
      {ValueType::kInt8, IndexEncoding::kDeltaVarint, 0x232d75383e7fdef8ull},
      {ValueType::kBf16, IndexEncoding::kRawU32, 0xeff335b8cc34608aull},
  };
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (uint32_t r = 0; r < 500; ++r) {
    rows.push_back(r * r + 3);
    for (int j = 0; j < 4; ++j) values.push_back(0.01f * (r + 1) * (j - 1.5f));
  }
  for (const Case& c : cases) {
    SparsePacketMeta meta{.table_id = 1,
                          .shard_id = 0,
                          .sender_id = 3,
                          .step = 9,
                          .row_dim = 4,
                          .value_type = c.type,
                          .index_encoding = c.encoding,
                          .int8_block = 16};
    std::vector<uint8_t> out;
    std::vector<EncodedPacket> packets;
    ASSERT_TRUE(
        EncodeSparsePackets(meta, rows, values, 4096, &out, &packets).ok());
    EXPECT_EQ(XXH3_64bits(out.data(), out.size()), c.hash)
        << std::hex << "0x" << XXH3_64bits(out.data(), out.size()) << "ull"
        << " for value type " << static_cast<int>(c.type);
  }
}

TEST(KeyHashTest, KeyFromHashUndoesKeyHash) {
  std::mt19937_64 rng(21);
  for (uint64_t k :
       {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, uint64_t{1} << 63}) {
    EXPECT_EQ(KeyFromHash(KeyHash(k)), k);
  }
  for (int i = 0; i < 100000; ++i) {
    const uint64_t k = rng();
    ASSERT_EQ(KeyFromHash(KeyHash(k)), k);
    ASSERT_EQ(KeyHash(KeyFromHash(k)), k);
  }
}

TEST(KeyedPacketTest, KeysSentAsHashesDecodeToTheKeysInHashOrder) {
  std::mt19937_64 rng(23);
  for (IndexEncoding encoding : {IndexEncoding::kKeyHashDeltaVarint,
                                 IndexEncoding::kKeyHashFixedDeltas}) {
    for (ValueType type : kTypes) {
      std::vector<uint64_t> keys = Keys(3000, rng);
      std::sort(keys.begin(), keys.end(),
                [](uint64_t a, uint64_t b) { return KeyHash(a) < KeyHash(b); });
      std::vector<uint64_t> hashes;
      for (uint64_t k : keys) hashes.push_back(KeyHash(k));
      std::vector<float> values(keys.size() * 4);
      for (auto& v : values) v = static_cast<float>(rng() % 1000) / 8;
      std::vector<uint8_t> out;
      std::vector<EncodedPacket> packets;
      SparsePacketMeta meta = Meta(type, 4);
      meta.index_encoding = encoding;
      ASSERT_TRUE(
          EncodeKeyedPackets(meta, hashes, values, 4096, &out, &packets).ok());
      ASSERT_GT(packets.size(), 1u);
      std::vector<uint64_t> got_hashes;
      for (const EncodedPacket& pk : packets) {
        EXPECT_EQ(out[pk.offset + 6], static_cast<uint8_t>(encoding));
        // The hashes come out too when asked for.
        std::span<const uint8_t> bytes(out.data() + pk.offset, pk.size);
        auto h = ParseSparsePacketHeader(bytes, Keyed(4));
        ASSERT_TRUE(h.ok()) << h.status();
        std::vector<uint64_t> k(h->row_count), hs(h->row_count);
        std::vector<float> v(size_t{h->row_count} * 4);
        ASSERT_TRUE(DecodeKeyedPacket(bytes, *h, Keyed(4), k, v, hs).ok());
        got_hashes.insert(got_hashes.end(), hs.begin(), hs.end());
      }
      EXPECT_EQ(got_hashes, hashes);
      const Decoded d = DecodeAll(out, packets, 4);
      EXPECT_EQ(d.keys, keys);
      std::vector<float> want(values.size());
      RoundTrip(type, values.data(), values.size(), 8, want.data());
      EXPECT_EQ(d.values, want);
    }
    // Hashes out of order are refused as keys out of order are.
    std::vector<uint8_t> out;
    std::vector<EncodedPacket> packets;
    const std::vector<uint64_t> descending = {std::max(KeyHash(1), KeyHash(2)),
                                              std::min(KeyHash(1), KeyHash(2))};
    const std::vector<float> two = {1, 2};
    SparsePacketMeta meta = Meta(ValueType::kFp32, 1);
    meta.index_encoding = encoding;
    const Status s =
        EncodeKeyedPackets(meta, descending, two, 4096, &out, &packets);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  }
}

// One kKeyHashFixedDeltas packet of `hashes` (dim 1, fp32), as bytes.
std::vector<uint8_t> FixedDeltasPacket(const std::vector<uint64_t>& hashes) {
  SparsePacketMeta meta = Meta(ValueType::kFp32, 1);
  meta.index_encoding = IndexEncoding::kKeyHashFixedDeltas;
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  EXPECT_TRUE(EncodeKeyedPackets(meta, hashes,
                                 std::vector<float>(hashes.size(), 1.0f), 4096,
                                 &out, &packets)
                  .ok());
  EXPECT_EQ(packets.size(), 1u);
  return out;
}

TEST(KeyedPacketTest, FixedDeltasTakeTheBytesOfTheLargest) {
  // Deltas 1, 2^16 and 2^16 - 1: three bytes each, after the width byte
  // and the first hash in eight.
  const uint64_t first = 0x0123456789abcdefull;
  const std::vector<uint64_t> hashes = {first, first + 1, first + 1 + 65536,
                                        first + 1 + 65536 + 65535};
  const std::vector<uint8_t> p = FixedDeltasPacket(hashes);
  uint32_t index_bytes;
  std::memcpy(&index_bytes, p.data() + 44, 4);
  EXPECT_EQ(index_bytes, 9u + 3 * 3);
  EXPECT_EQ(p[56], 3);  // the width
  uint64_t got_first;
  std::memcpy(&got_first, p.data() + 57, 8);
  EXPECT_EQ(got_first, first);
  EXPECT_EQ(p[65], 1);  // delta 1 in three bytes
  EXPECT_EQ(p[66], 0);
  EXPECT_EQ(p[67], 0);
  EXPECT_TRUE(Decode(p).ok());
  // One key: the width byte and the hash alone; all eight bytes wide.
  EXPECT_TRUE(Decode(FixedDeltasPacket({first})).ok());
  EXPECT_TRUE(Decode(FixedDeltasPacket({0, ~uint64_t{0}})).ok());
  EXPECT_EQ(FixedDeltasPacket({0, ~uint64_t{0}})[56], 8);
}

TEST(KeyedPacketTest, TheDecoderRefusesBadFixedDeltas) {
  // Twelve keys 2^20 apart: deltas of three bytes, 8 bytes left for a load
  // at each but the last two, which are read byte by byte.
  std::vector<uint64_t> hashes;
  for (uint64_t i = 0; i < 12; ++i) hashes.push_back(1000 + (i << 20));
  const std::vector<uint8_t> good = FixedDeltasPacket(hashes);
  ASSERT_TRUE(Decode(good).ok());
  ASSERT_EQ(good[56], 3);
  for (uint8_t width : {0, 9, 2, 4}) {  // none, too wide, or not this length
    std::vector<uint8_t> p = good;
    p[56] = width;
    Reseal(&p);
    EXPECT_TRUE(Decode(p).Is(StatusCode::kCorruption)) << int{width};
  }
  const size_t deltas = 56 + 9;
  for (size_t key : {size_t{1}, size_t{6}, size_t{11}}) {  // loaded, and not
    std::vector<uint8_t> p = good;  // the same key twice: delta 0
    const size_t at = deltas + 3 * (key - 1);
    p[at] = p[at + 1] = p[at + 2] = 0;
    Reseal(&p);
    const Status s = Decode(p);
    EXPECT_TRUE(s.Is(StatusCode::kInvalidArgument)) << key << ": " << s;
    EXPECT_NE(s.message().find("at " + std::to_string(key)), std::string::npos)
        << s;
  }
  {
    std::vector<uint8_t> p = good;  // the first hash near 2^64: overflows
    const uint64_t near_end = ~uint64_t{0} - (uint64_t{5} << 20);
    std::memcpy(p.data() + 57, &near_end, 8);
    Reseal(&p);
    const Status s = Decode(p);
    EXPECT_TRUE(s.Is(StatusCode::kCorruption)) << s;
    EXPECT_NE(s.message().find("key 6 is past 2^64"), std::string::npos) << s;
  }
  {
    std::vector<uint8_t> p = good;  // a flipped byte without a new checksum
    p[deltas] ^= 1;
    EXPECT_TRUE(Decode(p).Is(StatusCode::kCorruption));
  }
}

}  // namespace
}  // namespace ps::protocol
