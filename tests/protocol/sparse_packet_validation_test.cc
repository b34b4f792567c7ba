// The sparse packet decoder's validation: one specific status per
// violation, and a hardening run over 100k+ random and mutated packets (the
// ASan build checks that none reads or writes outside its buffers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "protocol/sparse_packet.h"
#include "tests/protocol/sparse_packet_test_util.h"

namespace ps::protocol {
namespace {

using namespace ::ps::protocol::testing;  // NOLINT: test helpers

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
}  // namespace ps::protocol
