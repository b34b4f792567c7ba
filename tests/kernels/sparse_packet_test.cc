// The sparse packet codec: round trips per value type and index encoding,
// cutting into packets that fit a slot, one specific status per violation,
// and a hardening run over 100k+ random and mutated packets (the ASan build
// checks that none reads or writes outside its buffers).
#include "kernels/sparse_packet.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

namespace ps::kernels {
namespace {

constexpr ValueType kTypes[] = {ValueType::kFp32, ValueType::kFp16,
                                ValueType::kBf16, ValueType::kInt8};

struct Push {
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

Push RandomPush(size_t n, uint32_t dim, uint64_t table_rows,
                std::mt19937& rng) {
  std::set<uint32_t> picked;
  std::uniform_int_distribution<uint64_t> row(0, table_rows - 1);
  while (picked.size() < n) picked.insert(static_cast<uint32_t>(row(rng)));
  Push p;
  p.rows.assign(picked.begin(), picked.end());
  std::normal_distribution<float> val(0.0f, 0.01f);
  p.values.resize(n * dim);
  for (auto& v : p.values) v = val(rng);
  return p;
}

// Re-seals a packet after a mutation so decoding reaches the deeper checks.
void Reseal(std::vector<uint8_t>& pk) {
  if (pk.size() < kSparsePacketHeaderBytes) return;
  uint64_t seed;
  std::memcpy(&seed, pk.data(), 8);
  uint64_t sum = XXH3_64bits_withSeed(pk.data() + 16, pk.size() - 16, seed);
  std::memcpy(pk.data() + 8, &sum, 8);
}

void SetU32(std::vector<uint8_t>& pk, size_t off, uint32_t v) {
  if (off + 4 <= pk.size()) std::memcpy(pk.data() + off, &v, 4);
}

// The value the receiver should see for push value i (quantized per packet).
std::vector<float> Expected(const SparsePacketMeta& meta, const Push& push,
                            const std::vector<EncodedPacket>& packets) {
  std::vector<float> want(push.values.size());
  for (const EncodedPacket& pk : packets) {
    size_t first = pk.first_row * meta.row_dim;
    RoundTrip(meta.value_type, push.values.data() + first,
              size_t{pk.row_count} * meta.row_dim, meta.int8_block,
              want.data() + first);
  }
  return want;
}

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
}

class DecoderViolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    meta_ = {.table_id = 2,
             .shard_id = 0,
             .row_dim = 2,
             .value_type = ValueType::kFp16};
    rows_ = {3, 200, 70000};
    vals_ = {1, 2, 3, 4, 5, 6};
    std::vector<EncodedPacket> packets;
    ASSERT_TRUE(
        EncodeSparsePackets(meta_, rows_, vals_, 4096, &good_, &packets).ok());
  }
  Status Decode(const std::vector<uint8_t>& pk,
                SparsePacketExpectations ex = {}) {
    if (ex.table_rows == 0) ex.table_rows = 100000;
    std::vector<uint32_t> rows(16);
    std::vector<float> vals(32);
    Status s = DecodeSparsePacket(pk, ex, rows, vals, nullptr);
    Status s2 = DecodeSparsePacketRows(
        pk, ex, [](uint32_t, const float*) {}, nullptr);
    EXPECT_EQ(s.code(), s2.code()) << s << " vs " << s2;
    return s;
  }
  void ExpectCode(const std::vector<uint8_t>& pk, StatusCode code,
                  const char* words, SparsePacketExpectations ex = {}) {
    Status s = Decode(pk, ex);
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(words), std::string::npos) << s;
  }
  SparsePacketMeta meta_;
  std::vector<uint32_t> rows_;
  std::vector<float> vals_;
  std::vector<uint8_t> good_;
};

TEST_F(DecoderViolationTest, EachViolationHasItsOwnStatus) {
  ASSERT_TRUE(Decode(good_).ok());
  auto pk = good_;
  ExpectCode(std::vector<uint8_t>(good_.begin(), good_.begin() + 20),
             StatusCode::kCorruption, "shorter than");
  pk = good_;
  pk[0] ^= 1;
  ExpectCode(pk, StatusCode::kCorruption, "magic");
  pk = good_;
  pk[4] = 9;
  ExpectCode(pk, StatusCode::kInvalidArgument, "version");
  pk = good_;
  pk[5] = 7;
  ExpectCode(pk, StatusCode::kInvalidArgument, "value type");
  pk = good_;
  pk[6] = 0;
  ExpectCode(pk, StatusCode::kInvalidArgument, "index encoding");
  pk = good_;
  pk[7] = 1;
  ExpectCode(pk, StatusCode::kInvalidArgument, "flags");
  pk = good_;
  pk[30] ^= 0x40;  // a payload-free header byte (row_dim) without reseal
  ExpectCode(pk, StatusCode::kInvalidArgument, "row_dim", {.row_dim = 2});
  pk = good_;
  pk.back() ^= 0x10;
  ExpectCode(pk, StatusCode::kCorruption, "checksum");
  ExpectCode(good_, StatusCode::kInvalidArgument, "table", {.table_id = 5});
  ExpectCode(good_, StatusCode::kInvalidArgument, "shard", {.shard_id = 1});
  ExpectCode(good_, StatusCode::kOutOfRange, "row index 70000",
             {.table_rows = 70000});
  ExpectCode(good_, StatusCode::kOutOfRange, "rows", {.max_row_count = 2});
  pk = good_;
  pk.push_back(0);
  ExpectCode(pk, StatusCode::kCorruption, "payload_bytes");
  pk = good_;
  SetU32(pk, 40, 4);  // row_count
  Reseal(pk);
  ExpectCode(pk, StatusCode::kCorruption, "payload_bytes");
  pk = good_;
  SetU32(pk, 40, 0);
  Reseal(pk);
  ExpectCode(pk, StatusCode::kInvalidArgument, "row_count is 0");
  pk = good_;
  SetU32(pk, 52, 64);  // int8 block on fp16
  Reseal(pk);
  ExpectCode(pk, StatusCode::kInvalidArgument, "int8_block");

  // Index section: indices 3, 200, 70000 are varints 03 | c8 01 | f0 a2 04.
  pk = good_;
  pk[56 + 1] = 0x00;  // delta 200 -> 0 (+ continuation byte kept)
  pk[56 + 2] = 0x00;
  Reseal(pk);
  Status s = Decode(pk);
  EXPECT_FALSE(s.ok());
  pk = good_;
  pk[56 + 1] = 0x80;  // 200 -> 128: still valid, just different
  Reseal(pk);
  EXPECT_TRUE(Decode(pk).ok());
  pk = good_;
  pk[56] = 0x00;  // first index 0: fine; then make the second delta 0
  pk[56 + 1] = 0x80;
  pk[56 + 2] = 0x00;
  Reseal(pk);
  ExpectCode(pk, StatusCode::kInvalidArgument, "strictly increasing");
  pk = good_;
  pk[56 + 5] = 0xff;  // last varint now runs past the index section
  Reseal(pk);
  ExpectCode(pk, StatusCode::kCorruption, "ends inside index");
  pk = good_;
  SetU32(pk, 44, 7);  // index_bytes: claims 7 of 6
  Reseal(pk);
  Status s7 = Decode(pk);
  EXPECT_TRUE(s7.Is(StatusCode::kCorruption)) << s7;
  pk = good_;
  pk[56 + 6] = 1;  // padding after the 6 index bytes
  Reseal(pk);
  ExpectCode(pk, StatusCode::kCorruption, "padding");
  pk = good_;
  pk[64 + 1] = 0x7c;  // first fp16 value -> inf
  pk[64] = 0x00;
  Reseal(pk);
  ExpectCode(pk, StatusCode::kCorruption, "non-finite");
}

TEST_F(DecoderViolationTest, Int8ScalesAreChecked) {
  SparsePacketMeta meta = meta_;
  meta.value_type = ValueType::kInt8;
  meta.int8_block = 4;
  std::vector<EncodedPacket> packets;
  ASSERT_TRUE(
      EncodeSparsePackets(meta, rows_, vals_, 4096, &good_, &packets).ok());
  ASSERT_TRUE(Decode(good_).ok());
  auto pk = good_;
  float bad = -1.0f;
  std::memcpy(pk.data() + 64, &bad, 4);
  Reseal(pk);
  ExpectCode(pk, StatusCode::kCorruption, "scale");
  pk = good_;
  pk[64 + 8] = 0x80;  // value -128
  Reseal(pk);
  ExpectCode(pk, StatusCode::kCorruption, "-128");
}

// 100k+ packets: random bytes, bit flips, truncations and field changes,
// half of them resealed so the checks behind the checksum run too.
TEST(SparsePacketHardeningTest,
     RandomAndMutatedPacketsNeverCrashAndAreRejected) {
  std::mt19937 rng(11);
  std::vector<std::vector<uint8_t>> bases;
  for (ValueType type : kTypes) {
    for (IndexEncoding enc :
         {IndexEncoding::kDeltaVarint, IndexEncoding::kRawU32}) {
      for (uint32_t dim : {1u, 5u}) {
        SparsePacketMeta meta{.table_id = 1,
                              .row_dim = dim,
                              .value_type = type,
                              .index_encoding = enc,
                              .int8_block = 8};
        Push push = RandomPush(1 + rng() % 60, dim, 5000, rng);
        std::vector<uint8_t> out;
        std::vector<EncodedPacket> packets;
        ASSERT_TRUE(EncodeSparsePackets(meta, push.rows, push.values, 1 << 16,
                                        &out, &packets)
                        .ok());
        bases.push_back(out);
      }
    }
  }
  const SparsePacketExpectations ex{.table_rows = 5000, .max_row_count = 4096};
  std::vector<uint32_t> rows(4096);
  std::vector<float> vals(4096 * 8);
  int rejected = 0, accepted = 0, flips_rejected = 0, flips = 0;
  constexpr int kPackets = 120000;
  for (int iter = 0; iter < kPackets; ++iter) {
    const std::vector<uint8_t>& base = bases[rng() % bases.size()];
    std::vector<uint8_t> pk = base;
    int kind = static_cast<int>(rng() % 6);
    bool resealed = false;
    switch (kind) {
      case 0: {  // random bytes, sometimes behind a valid magic and version
        pk.resize(rng() % 200);
        for (auto& b : pk) b = static_cast<uint8_t>(rng());
        if (pk.size() >= 8 && rng() % 2) {
          SetU32(pk, 0, kSparsePacketMagic);
          pk[4] = kSparsePacketVersion;
          Reseal(pk);
          resealed = true;
        }
        break;
      }
      case 1:    // bit flips, not resealed: must all fail
      case 2: {  // bit flips, resealed
        int n = 1 + static_cast<int>(rng() % 3);
        for (int i = 0; i < n; ++i)
          pk[rng() % pk.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        if (kind == 2) {
          Reseal(pk);
          resealed = true;
        }
        break;
      }
      case 3: {  // truncate or extend, fix payload_bytes, reseal
        size_t len = rng() % (pk.size() + 16);
        pk.resize(len, static_cast<uint8_t>(rng()));
        if (rng() % 2 && len >= kSparsePacketHeaderBytes)
          SetU32(pk, 48, static_cast<uint32_t>(len - kSparsePacketHeaderBytes));
        Reseal(pk);
        resealed = true;
        break;
      }
      case 4: {  // a length or count field set to something else, resealed
        static const size_t kFields[] = {28, 40, 44, 48, 52};
        size_t off = kFields[rng() % 5];
        uint32_t v;
        switch (rng() % 4) {
          case 0:
            v = static_cast<uint32_t>(rng());
            break;
          case 1:
            v = 0xffffffffu - static_cast<uint32_t>(rng() % 4);
            break;
          case 2:
            v = static_cast<uint32_t>(rng() % 8);
            break;
          default: {
            uint32_t cur;
            std::memcpy(&cur, pk.data() + off, 4);
            v = cur + static_cast<uint32_t>(rng() % 9) - 4;
          }
        }
        SetU32(pk, off, v);
        Reseal(pk);
        resealed = true;
        break;
      }
      case 5: {  // payload bytes randomized, resealed
        size_t n = 1 + rng() % 4;
        for (size_t i = 0; i < n; ++i) {
          size_t pos = kSparsePacketHeaderBytes +
                       rng() % (pk.size() - kSparsePacketHeaderBytes);
          pk[pos] = static_cast<uint8_t>(rng());
        }
        Reseal(pk);
        resealed = true;
        break;
      }
    }
    // An exact-size heap copy, so ASan sees any read past the end.
    std::vector<uint8_t> exact(pk);
    SparsePacketHeader h;
    Status s = DecodeSparsePacket(exact, ex, rows, vals, &h);
    size_t reported = 0;
    Status s2 = DecodeSparsePacketRows(
        exact, ex, [&](uint32_t, const float*) { ++reported; }, nullptr);
    ASSERT_EQ(s.code(), s2.code()) << s << " vs " << s2;
    if (kind == 1 && pk != base) {  // two flips of one bit cancel out
      ++flips;
      if (!s.ok()) ++flips_rejected;
      ASSERT_FALSE(s.ok()) << "an unsealed bit flip was accepted";
    }
    if (!s.ok()) {
      ++rejected;
      ASSERT_EQ(reported, 0u) << "rows reported from an invalid packet";
      ASSERT_FALSE(s.message().empty());
      continue;
    }
    ++accepted;
    ASSERT_TRUE(resealed || pk == base);
    // Whatever was accepted satisfies every promise the decoder makes.
    ASSERT_EQ(reported, h.row_count);
    ASSERT_EQ(exact.size(), h.packet_bytes());
    for (uint32_t i = 0; i < h.row_count; ++i) {
      ASSERT_LT(rows[i], ex.table_rows);
      if (i > 0) {
        ASSERT_GT(rows[i], rows[i - 1]);
      }
    }
    for (uint64_t i = 0; i < uint64_t{h.row_count} * h.meta.row_dim; ++i)
      ASSERT_TRUE(std::isfinite(vals[i]));
  }
  EXPECT_EQ(rejected + accepted, kPackets);
  EXPECT_EQ(flips_rejected, flips);
  EXPECT_GT(rejected, kPackets / 2);
  std::printf(
      "hardening: %d packets, %d rejected, %d accepted (valid after "
      "mutation)\n",
      kPackets, rejected, accepted);
}

}  // namespace
}  // namespace ps::kernels
