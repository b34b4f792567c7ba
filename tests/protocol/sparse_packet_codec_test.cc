// The sparse packet codec: round trips per value type and index encoding,
// cutting into packets that fit a slot, and the encoder's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "kernels/varint_index.h"
#include "protocol/sparse_packet.h"
#include "tests/protocol/sparse_packet_test_util.h"

namespace ps::protocol {
namespace {

using namespace ::ps::protocol::testing;  // NOLINT: test helpers
using kernels::RoundTrip;
using kernels::ValueTypeBytes;
using kernels::ValueTypeName;

TEST(SparsePacketTest, RoundTripsEveryTypeEncodingDimAndSize) {
  std::mt19937 rng(7);
  for (ValueType type : kTypes) {
    for (IndexEncoding enc :
         {IndexEncoding::kDeltaVarint, IndexEncoding::kRawU32}) {
      for (uint32_t dim : {1u, 3u, 8u, 17u}) {
        for (size_t n : {0u, 1u, 2u, 7u, 9u, 100u, 1001u}) {
          SparsePacketMeta meta{.table_id = 3,
                                .shard_id = 1,
                                .sender_id = 9,
                                .step = 12345678901ull,
                                .row_dim = dim,
                                .value_type = type,
                                .index_encoding = enc,
                                .int8_block = 16};
          const uint64_t table_rows = 1u << 20;
          Push push = RandomPush(n, dim, table_rows, rng);
          std::vector<uint8_t> out;
          std::vector<EncodedPacket> packets;
          for (size_t max_bytes : {size_t{1} << 20, size_t{600}}) {
            ASSERT_TRUE(EncodeSparsePackets(meta, push.rows, push.values,
                                            max_bytes, &out, &packets)
                            .ok());
            if (n == 0) {
              EXPECT_TRUE(packets.empty());
              EXPECT_TRUE(out.empty());
              continue;
            }
            std::vector<float> want = Expected(meta, push, packets);
            size_t next_row = 0;
            for (const EncodedPacket& pk : packets) {
              ASSERT_LE(pk.size, max_bytes);
              ASSERT_EQ(pk.first_row, next_row);
              ASSERT_EQ(pk.size % 4, 0u);
              next_row += pk.row_count;
              std::vector<uint8_t> bytes(out.begin() + pk.offset,
                                         out.begin() + pk.offset + pk.size);
              std::vector<uint32_t> rows(pk.row_count);
              std::vector<float> vals(size_t{pk.row_count} * dim);
              SparsePacketHeader h;
              SparsePacketExpectations ex{.table_rows = table_rows,
                                          .row_dim = dim,
                                          .table_id = 3,
                                          .shard_id = 1};
              Status s = DecodeSparsePacket(bytes, ex, rows, vals, &h);
              ASSERT_TRUE(s.ok()) << s;
              EXPECT_EQ(h.meta.step, meta.step);
              EXPECT_EQ(h.meta.sender_id, 9u);
              EXPECT_EQ(h.row_count, pk.row_count);
              for (uint32_t i = 0; i < pk.row_count; ++i)
                ASSERT_EQ(rows[i], push.rows[pk.first_row + i]);
              ASSERT_EQ(
                  0, std::memcmp(vals.data(), want.data() + pk.first_row * dim,
                                 4 * vals.size()))
                  << ValueTypeName(type) << " dim " << dim << " n " << n;
              // The callback form reports the same rows and values.
              size_t k = 0;
              ASSERT_TRUE(
                  DecodeSparsePacketRows(
                      bytes, ex,
                      [&](uint32_t row, const float* v) {
                        ASSERT_EQ(row, rows[k]);
                        ASSERT_EQ(
                            0, std::memcmp(v, vals.data() + k * dim, 4 * dim));
                        ++k;
                      },
                      nullptr)
                      .ok());
              EXPECT_EQ(k, pk.row_count);
              // An unaligned copy decodes the same.
              std::vector<uint8_t> shifted(bytes.size() + 1);
              std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
              std::vector<float> vals2(vals.size());
              ASSERT_TRUE(DecodeSparsePacket(std::span(shifted).subspan(1), ex,
                                             rows, vals2, nullptr)
                              .ok());
              ASSERT_EQ(vals, vals2);
            }
            ASSERT_EQ(next_row, n);
            if (max_bytes == 600 && dim * ValueTypeBytes(type) * n > 2000) {
              ASSERT_GT(packets.size(), 1u);
            }
          }
        }
      }
    }
  }
}

// Packets are cut greedily: every packet but the last would overflow with
// its next row (the cutter takes fixed-width packets in blocks of rows, and
// must cut where a row-by-row cut would). The size a packet would have is
// worked out here from the layout: header, index section and value section
// each padded to 4 bytes. Row gaps small and large, so that deltas take 1
// to 5 varint bytes.
TEST(SparsePacketTest, PacketsAreAsFullAsTheSlotAllows) {
  std::mt19937 rng(11);
  auto align4 = [](uint64_t n) { return (n + 3) / 4 * 4; };
  for (ValueType type : {ValueType::kFp32, ValueType::kFp16}) {
    for (IndexEncoding enc :
         {IndexEncoding::kDeltaVarint, IndexEncoding::kRawU32}) {
      for (uint32_t dim : {1u, 3u}) {
        for (uint64_t table_rows : {uint64_t{6000}, uint64_t{1} << 31}) {
          SparsePacketMeta meta{.table_id = 3,
                                .row_dim = dim,
                                .value_type = type,
                                .index_encoding = enc};
          Push push = RandomPush(5000, dim, table_rows, rng);
          auto index_bytes = [&](size_t first, size_t rows) {
            if (enc == IndexEncoding::kRawU32) return uint64_t{4} * rows;
            uint64_t b = kernels::VarintBytes(push.rows[first]);
            for (size_t r = first + 1; r < first + rows; ++r) {
              b += kernels::VarintBytes(push.rows[r] - push.rows[r - 1]);
            }
            return b;
          };
          for (size_t max_bytes : {size_t{600}, size_t{4100}, size_t{65536}}) {
            std::vector<uint8_t> out;
            std::vector<EncodedPacket> packets;
            ASSERT_TRUE(EncodeSparsePackets(meta, push.rows, push.values,
                                            max_bytes, &out, &packets)
                            .ok());
            for (size_t i = 0; i < packets.size(); ++i) {
              const EncodedPacket& pk = packets[i];
              auto size_with = [&](size_t rows) {
                return kSparsePacketHeaderBytes +
                       align4(index_bytes(pk.first_row, rows)) +
                       align4(rows * dim * ValueTypeBytes(type));
              };
              EXPECT_EQ(pk.size, size_with(pk.row_count));
              if (i + 1 == packets.size()) continue;
              EXPECT_GT(size_with(pk.row_count + size_t{1}), max_bytes)
                  << "packet " << i << " of " << packets.size() << " ("
                  << pk.row_count << " rows, " << pk.size
                  << " bytes) had room for its next row";
            }
          }
        }
      }
    }
  }
}

TEST(SparsePacketTest, Fp32IsExactAndFp16WithinBound) {
  std::mt19937 rng(8);
  Push push = RandomPush(5000, 4, 1u << 24, rng);
  for (ValueType type :
       {ValueType::kFp32, ValueType::kFp16, ValueType::kBf16}) {
    SparsePacketMeta meta{.row_dim = 4, .value_type = type};
    std::vector<uint8_t> out;
    std::vector<EncodedPacket> packets;
    ASSERT_TRUE(EncodeSparsePackets(meta, push.rows, push.values, 1 << 30, &out,
                                    &packets)
                    .ok());
    ASSERT_EQ(packets.size(), 1u);
    std::vector<uint32_t> rows(5000);
    std::vector<float> vals(20000);
    ASSERT_TRUE(
        DecodeSparsePacket(out, {.table_rows = 1u << 24}, rows, vals, nullptr)
            .ok());
    float rel = type == ValueType::kFp32   ? 0.0f
                : type == ValueType::kFp16 ? 0x1p-11f
                                           : 0x1p-8f;
    for (size_t i = 0; i < vals.size(); ++i) {
      float a = std::fabs(push.values[i]);
      float bound =
          type == ValueType::kFp16 && a < 0x1p-14f ? 0x1p-25f : rel * a;
      ASSERT_LE(std::fabs(vals[i] - push.values[i]), bound) << i;
    }
  }
}

TEST(SparsePacketTest, WireBytesPerNonzeroAtOnePercentFp16) {
  std::mt19937 rng(9);
  const uint32_t table_rows = 1u << 22;
  Push push = RandomPush(table_rows / 100, 1, table_rows, rng);
  SparsePacketMeta meta{.value_type = ValueType::kFp16};
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  ASSERT_TRUE(EncodeSparsePackets(meta, push.rows, push.values, 64 << 10, &out,
                                  &packets)
                  .ok());
  double per_nnz = static_cast<double>(out.size()) / push.rows.size();
  EXPECT_LT(per_nnz, 4.0);
  EXPECT_GT(per_nnz, 3.0);  // 2 value bytes + a varint of >= 1 byte, mostly 2
}

TEST(SparsePacketTest, Int8PacketsAreCutOnBlockBoundaries) {
  std::mt19937 rng(10);
  Push push = RandomPush(3000, 3, 1u << 20, rng);
  SparsePacketMeta meta{
      .row_dim = 3, .value_type = ValueType::kInt8, .int8_block = 64};
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  ASSERT_TRUE(
      EncodeSparsePackets(meta, push.rows, push.values, 1000, &out, &packets)
          .ok());
  ASSERT_GT(packets.size(), 5u);
  std::vector<float> whole(push.values.size());
  RoundTrip(ValueType::kInt8, push.values.data(), whole.size(), 64,
            whole.data());
  for (const EncodedPacket& pk : packets) {
    if (pk.first_row + pk.row_count < push.rows.size()) {
      ASSERT_EQ((pk.first_row + pk.row_count) * 3 % 64, 0u);
    }
    std::vector<uint32_t> rows(pk.row_count);
    std::vector<float> vals(pk.row_count * 3);
    ASSERT_TRUE(DecodeSparsePacket(std::span(out).subspan(pk.offset, pk.size),
                                   {.table_rows = 1u << 20}, rows, vals,
                                   nullptr)
                    .ok());
    // The whole push quantized at once equals what each packet carries.
    ASSERT_EQ(0, std::memcmp(vals.data(), whole.data() + pk.first_row * 3,
                             4 * vals.size()));
  }
  // A slot too small for one block of rows is an error, not a partial push.
  EXPECT_TRUE(
      EncodeSparsePackets(meta, push.rows, push.values, 100, &out, &packets)
          .Is(StatusCode::kInvalidArgument));
}

TEST(SparsePacketTest, EncoderRejectsBadInput) {
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  std::vector<uint32_t> rows = {1, 5, 5};
  std::vector<float> vals = {1, 2, 3};
  SparsePacketMeta meta;
  EXPECT_TRUE(EncodeSparsePackets(meta, rows, vals, 4096, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
  rows = {1, 5, 6};
  EXPECT_TRUE(EncodeSparsePackets(meta, rows, std::span(vals).first(2), 4096,
                                  &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
  meta.row_dim = 0;
  EXPECT_TRUE(EncodeSparsePackets(meta, rows, vals, 4096, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
  meta.row_dim = 1;
  EXPECT_TRUE(EncodeSparsePackets(meta, rows, vals, 60, &out, &packets)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(EncodeSparsePackets(meta, rows, vals, 4096, &out, &packets).ok());
  EXPECT_TRUE(EncodeSparsePackets(meta, rows, vals, 4096, &out, &packets, 6)
                  .Is(StatusCode::kInvalidArgument));
}

// Headroom shifts the packets, whose bytes stay those of an encoding
// without it.
TEST(SparsePacketTest, HeadroomComesBeforeTheFirstPacket) {
  std::mt19937 rng(5);
  SparsePacketMeta meta{.table_id = 2, .row_dim = 3};
  Push push = RandomPush(500, 3, 1u << 16, rng);
  std::vector<uint8_t> plain, roomy;
  std::vector<EncodedPacket> plain_packets, roomy_packets;
  ASSERT_TRUE(EncodeSparsePackets(meta, push.rows, push.values, 2048, &plain,
                                  &plain_packets)
                  .ok());
  ASSERT_TRUE(EncodeSparsePackets(meta, push.rows, push.values, 2048, &roomy,
                                  &roomy_packets, 8)
                  .ok());
  ASSERT_GT(plain_packets.size(), 1u);
  ASSERT_EQ(roomy_packets.size(), plain_packets.size());
  EXPECT_EQ(roomy.size(), plain.size() + 8);
  for (size_t i = 0; i < plain_packets.size(); ++i) {
    const EncodedPacket& a = plain_packets[i];
    const EncodedPacket& b = roomy_packets[i];
    EXPECT_EQ(b.offset, a.offset + 8);
    ASSERT_EQ(b.size, a.size);
    EXPECT_EQ(0, std::memcmp(plain.data() + a.offset, roomy.data() + b.offset,
                             a.size));
  }
}

}  // namespace
}  // namespace ps::protocol
