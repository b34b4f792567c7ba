// The delta-varint index decoder (kernels/varint_index.h) against a plain
// byte-by-byte reference: random index streams with deltas of every length
// (mostly the one- and two-byte ones the AVX2 bulk decoder takes, some
// longer ones it hands to the scalar decoder), zero deltas, rows that run
// past 2^32, and every malformed ending. The public function (AVX2 on a CPU
// that has it) and the scalar decoder alone must both agree with the
// reference.
#include "kernels/varint_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/varint_index_internal.h"

namespace ps::kernels {
namespace {

struct Decoded {
  std::vector<uint32_t> rows;  // each running row mod 2^32
  uint64_t last = 0;
  bool zero_delta = false;
};

// nullopt where the section is malformed.
std::optional<Decoded> Reference(const std::vector<uint8_t>& section,
                                 uint32_t n) {
  Decoded d;
  size_t at = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t delta = 0;
    for (int byte = 0;; ++byte) {
      if (at == section.size() || byte == 5) return std::nullopt;
      const uint8_t b = section[at++];
      delta |= uint64_t{b & 0x7fu} << (7 * byte);
      if (b < 0x80) break;
    }
    if (delta > UINT32_MAX) return std::nullopt;
    if (i > 0 && delta == 0) d.zero_delta = true;
    d.last += delta;
    d.rows.push_back(static_cast<uint32_t>(d.last));
  }
  if (at != section.size()) return std::nullopt;
  return d;
}

// Decodes with the public function (kStore and not) and with the scalar
// decoder alone, and checks all three against the reference.
void ExpectLikeReference(const std::vector<uint8_t>& section, uint32_t n) {
  const std::optional<Decoded> want = Reference(section, n);
  std::vector<uint32_t> out(n + 1, 0xdeadbeef);
  DeltaVarintSummary summary;
  Status s = DecodeDeltaVarints<true>(section.data(), section.size(), n,
                                      out.data(), &summary);
  DeltaVarintSummary check_only;
  Status s2 = DecodeDeltaVarints<false>(section.data(), section.size(), n,
                                        nullptr, &check_only);
  internal::VarintCursor cur;
  cur.section = cur.p = section.data();
  cur.total = n;
  std::vector<uint32_t> scalar(n + 1, 0xdeadbeef);
  Status s3 = internal::DecodeVarintsScalar<true>(
      section.data() + section.size(), n, scalar.data(), &cur);
  const bool scalar_ok = s3.ok() && cur.p == section.data() + section.size();
  if (!want) {
    EXPECT_TRUE(s.Is(StatusCode::kCorruption)) << s;
    EXPECT_TRUE(s2.Is(StatusCode::kCorruption)) << s2;
    EXPECT_FALSE(scalar_ok);
    return;
  }
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(s2.ok()) << s2;
  ASSERT_TRUE(scalar_ok) << s3;
  EXPECT_EQ(out[n], 0xdeadbeef) << "wrote past n";
  out.resize(n);
  scalar.resize(n);
  EXPECT_EQ(out, want->rows);
  EXPECT_EQ(scalar, want->rows);
  EXPECT_EQ(summary.last, want->last);
  EXPECT_EQ(check_only.last, want->last);
  EXPECT_EQ(cur.row, want->last);
  EXPECT_EQ(summary.zero_delta, want->zero_delta);
  EXPECT_EQ(check_only.zero_delta, want->zero_delta);
  EXPECT_EQ(cur.zero_delta, want->zero_delta);
}

std::vector<uint8_t> Encode(const std::vector<uint32_t>& deltas) {
  std::vector<uint8_t> out(5 * deltas.size());
  uint8_t* p = out.data();
  for (uint32_t d : deltas) p = PutVarint(p, d);
  out.resize(p - out.data());
  return out;
}

// Deltas: mostly 1..2^14 (one or two bytes), some of 3-5 bytes, some 0.
std::vector<uint32_t> RandomDeltas(std::mt19937& rng, size_t n, uint32_t first,
                                   int zero_per_mille, int long_per_mille) {
  std::uniform_int_distribution<int> pick(0, 999);
  std::uniform_int_distribution<uint32_t> short_delta(1, (1u << 14) - 1);
  std::uniform_int_distribution<uint32_t> long_delta(1u << 14, UINT32_MAX);
  std::vector<uint32_t> d;
  for (size_t i = 0; i < n; ++i) {
    const int r = pick(rng);
    d.push_back(i == 0                                ? first
                : r < zero_per_mille                  ? 0
                : r < zero_per_mille + long_per_mille ? long_delta(rng)
                : r % 3 == 0                          ? short_delta(rng) % 128
                                                      : short_delta(rng));
  }
  return d;
}

// VarintBytes is the length PutVarint writes, at every length's edges.
TEST(VarintIndexTest, VarintBytesIsWhatPutVarintWrites) {
  std::vector<uint32_t> values = {0, UINT32_MAX};
  for (int bits = 1; bits < 32; ++bits) {
    const uint32_t edge = uint32_t{1} << bits;
    values.insert(values.end(), {edge - 1, edge, edge + 1});
  }
  uint8_t buffer[8];
  for (uint32_t v : values) {
    EXPECT_EQ(VarintBytes(v),
              static_cast<size_t>(PutVarint(buffer, v) - buffer))
        << v;
  }
}

// Both delta writers give the bytes of one PutVarint per delta, for runs of
// one-byte deltas (the AVX-512 store), longer ones among them, and lengths
// around its 16-lane step.
TEST(VarintIndexTest, DeltaWritersMatchPutVarint) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<uint32_t> small(1, 127), any(1, 1u << 20);
  for (size_t n : {0u, 1u, 2u, 16u, 17u, 32u, 33u, 1000u}) {
    for (int long_per_mille : {0, 5, 300}) {
      std::vector<uint32_t> rows(n);
      uint32_t row = any(rng);
      for (size_t i = 0; i < n; ++i) {
        rows[i] = row;
        row += static_cast<int>(rng() % 1000) < long_per_mille ? any(rng)
                                                               : small(rng);
      }
      std::vector<uint8_t> want(5 * n + 64), got(5 * n + 64);
      uint8_t* w = want.data();
      for (size_t i = 0; i < n; ++i)
        w = PutVarint(w, i == 0 ? rows[0] : rows[i] - rows[i - 1]);
      want.resize(w - want.data());
      std::vector<uint8_t* (*)(const uint32_t*, size_t, uint8_t*)> writers = {
          &PutDeltaVarints, &internal::PutDeltaVarintsScalar};
      if (DetectCpuFeatures().avx512) {
        writers.push_back(&internal::PutDeltaVarintsAvx512);
      }
      for (auto* writer : writers) {
        uint8_t* end = writer(rows.data(), n, got.data());
        ASSERT_EQ(std::vector<uint8_t>(got.data(), end), want)
            << "n " << n << " long per mille " << long_per_mille;
      }
    }
  }
}

TEST(VarintIndexTest, DecodesLikeTheReference) {
  if (!DetectCpuFeatures().avx2) {
    GTEST_LOG_(INFO) << "no AVX2: the public function runs the scalar path";
  }
  std::mt19937 rng(5);
  for (size_t n : {0u, 1u, 2u, 7u, 8u, 9u, 15u, 16u, 17u, 33u, 100u, 5000u}) {
    for (uint32_t first : {0u, 1u, 300u, 0xfffff000u}) {
      for (int zero : {0, 5}) {
        for (int longer : {0, 20, 300}) {
          SCOPED_TRACE("n " + std::to_string(n) + " first " +
                       std::to_string(first) + " zero " + std::to_string(zero) +
                       " long " + std::to_string(longer));
          const std::vector<uint32_t> deltas =
              RandomDeltas(rng, n, first, zero, longer);
          const std::vector<uint8_t> section = Encode(deltas);
          ExpectLikeReference(section, static_cast<uint32_t>(n));
          if (section.empty()) continue;
          // Malformed: cut short, a byte too many, one index fewer/more.
          ExpectLikeReference(
              std::vector<uint8_t>(section.begin(), section.end() - 1),
              static_cast<uint32_t>(n));
          std::vector<uint8_t> longer_section = section;
          longer_section.push_back(1);
          ExpectLikeReference(longer_section, static_cast<uint32_t>(n));
          ExpectLikeReference(section, static_cast<uint32_t>(n - 1));
          ExpectLikeReference(section, static_cast<uint32_t>(n + 1));
        }
      }
    }
  }
}

TEST(VarintIndexTest, RefusesVarintsOver32Bits) {
  // 40 one-byte deltas, then a five-byte varint whose last byte is 0x10
  // (bit 32), then 40 more: the error sits in the middle of the bulk.
  std::vector<uint8_t> section(40, 3);
  for (uint8_t b : {0xff, 0xff, 0xff, 0xff, 0x10}) section.push_back(b);
  section.insert(section.end(), 40, 3);
  ExpectLikeReference(section, 81);
  DeltaVarintSummary summary;
  std::vector<uint32_t> out(81);
  Status s = DecodeDeltaVarints<true>(section.data(), section.size(), 81,
                                      out.data(), &summary);
  EXPECT_NE(s.message().find("varint index 40"), std::string::npos) << s;
  // The largest that fits (0x0f in the fifth byte) is fine.
  section[44] = 0x0f;
  ExpectLikeReference(section, 81);
}

TEST(VarintIndexTest, RunningRowPast32BitsIsReportedExactly) {
  // Rows wrap around 2^32 inside the bulk decoder's 32-bit lanes; the
  // summary must still hold the exact 64-bit last row for the caller to
  // refuse.
  std::vector<uint32_t> deltas(200, 100);
  deltas[0] = UINT32_MAX - 5000;
  const std::vector<uint8_t> section = Encode(deltas);
  ExpectLikeReference(section, 200);
  DeltaVarintSummary summary;
  std::vector<uint32_t> out(200);
  ASSERT_TRUE(DecodeDeltaVarints<true>(section.data(), section.size(), 200,
                                       out.data(), &summary)
                  .ok());
  EXPECT_EQ(summary.last, uint64_t{UINT32_MAX} - 5000 + 199 * 100);
  EXPECT_GT(summary.last, UINT32_MAX);
}

}  // namespace
}  // namespace ps::kernels
