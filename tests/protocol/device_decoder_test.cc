// The device packet decoder (protocol/cuda/device_decoder.h) against
// protocol::DecodeSparsePacket: the same rows and the same value bits for
// every value type and both index encodings on random packets made by
// protocol::EncodeSparsePackets, and the same status code for every
// malformed packet (tests/protocol/bad_packets.h). Every test that needs a
// GPU skips, saying why, when none is usable; the test that runs here checks
// that the decoder then says kNotSupported with the reason.
#include "protocol/cuda/device_decoder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "protocol/internal/sparse_packet_layout.h"
#include "protocol/sparse_packet.h"
#include "tests/kernels/gpu_test_support.h"
#include "tests/protocol/bad_packets.h"

namespace ps::kernels {
namespace {

using protocol::EncodedPacket;
using protocol::IndexEncoding;
using protocol::SparsePacketExpectations;
using protocol::SparsePacketMeta;

std::vector<uint32_t> FloatBits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), 4 * v.size());
  return bits;
}

// Strictly increasing rows below `table_rows` with gaps of every varint
// length (1 to 5 bytes: [1, 4], [2^7, 2^8), [2^14, 2^15), [2^21, 2^22),
// [2^28, 2^29)), the long ones rare enough that about `count` rows fit below
// 2^32 (so packets span many CUB tiles and thread blocks), and normal values
// with some tiny (fp16 subnormal) and some zero ones.
void RandomGradient(std::mt19937& rng, uint64_t table_rows, uint32_t dim,
                    size_t count, std::vector<uint32_t>* rows,
                    std::vector<float>* values) {
  rows->clear();
  values->clear();
  std::uniform_int_distribution<int> kind(0, 8191);
  uint64_t row = rng() % 3;
  while (rows->size() < count && row < table_rows) {
    rows->push_back(static_cast<uint32_t>(row));
    const int k = kind(rng);
    const int bits = k < 2 ? 28 : k < 64 ? 21 : k < 512 ? 14 : k < 2048 ? 7 : 0;
    row += bits == 0 ? 1 + rng() % 4
                     : (uint64_t{1} << bits) + rng() % (uint64_t{1} << bits);
  }
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (size_t i = 0; i < rows->size() * dim; ++i) {
    const int kind = static_cast<int>(rng() % 16);
    values->push_back(kind == 0   ? 0.0f
                      : kind == 1 ? normal(rng) * 1e-6f
                                  : normal(rng));
  }
}

TEST(DeviceDecoderTest, WithoutADeviceDecodeIsNotSupportedWithTheReason) {
  const Status available = gpu::DeviceAvailable();
  if (available.ok()) GTEST_SKIP() << "a CUDA device is usable here";
  SparsePacketMeta meta;
  meta.row_dim = 2;
  std::vector<uint8_t> bytes;
  std::vector<EncodedPacket> packets;
  ASSERT_TRUE(protocol::EncodeSparsePackets(meta, std::vector<uint32_t>{3},
                                            std::vector<float>{1.0f, 2.0f},
                                            1 << 16, &bytes, &packets)
                  .ok());
  SparsePacketExpectations expect;
  expect.table_rows = 10;
  std::vector<uint32_t> rows;
  std::vector<float> values;
  const Status s =
      protocol::gpu::DecodePacketToHost(bytes, expect, &rows, &values);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported) << s.ToString();
  EXPECT_EQ(s.message(), available.message());
}

TEST(DeviceDecoderTest, BitIdenticalToTheHostDecoderForEveryTypeAndEncoding) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(19);
  const uint64_t table_rows = uint64_t{1} << 32;
  for (ValueType type : {ValueType::kFp32, ValueType::kFp16, ValueType::kBf16,
                         ValueType::kInt8}) {
    for (IndexEncoding encoding :
         {IndexEncoding::kDeltaVarint, IndexEncoding::kRawU32}) {
      for (uint32_t dim : {1u, 16u, 33u, 128u}) {
        SparsePacketMeta meta;
        meta.row_dim = dim;
        meta.value_type = type;
        meta.index_encoding = encoding;
        meta.int8_block = type == ValueType::kInt8 ? 64 : 0;
        std::vector<uint32_t> rows;
        std::vector<float> values;
        RandomGradient(rng, table_rows, dim, 10000, &rows, &values);
        std::vector<uint8_t> bytes;
        std::vector<EncodedPacket> packets;
        ASSERT_TRUE(protocol::EncodeSparsePackets(meta, rows, values, 64 << 10,
                                                  &bytes, &packets)
                        .ok());
        SparsePacketExpectations expect;
        expect.table_rows = table_rows;
        for (const EncodedPacket& pk : packets) {
          const std::string what =
              std::string(ValueTypeName(type)) + " " +
              (encoding == IndexEncoding::kRawU32 ? "raw" : "varint") +
              " dim " + std::to_string(dim) + " packet at " +
              std::to_string(pk.offset);
          const std::span<const uint8_t> packet(bytes.data() + pk.offset,
                                                pk.size);
          std::vector<uint32_t> host_rows(pk.row_count);
          std::vector<float> host_values(size_t{pk.row_count} * dim);
          ASSERT_TRUE(protocol::DecodeSparsePacket(packet, expect, host_rows,
                                                   host_values, nullptr)
                          .ok())
              << what;
          std::vector<uint32_t> got_rows;
          std::vector<float> got_values;
          const Status s = protocol::gpu::DecodePacketToHost(
              packet, expect, &got_rows, &got_values);
          ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
          EXPECT_EQ(got_rows, host_rows) << what;
          EXPECT_EQ(FloatBits(got_values), FloatBits(host_values)) << what;
        }
      }
    }
  }
}

TEST(DeviceDecoderTest, RowsAtTheTopOfTheTableDecode) {
  SKIP_WITHOUT_GPU();
  for (IndexEncoding encoding :
       {IndexEncoding::kDeltaVarint, IndexEncoding::kRawU32}) {
    SparsePacketMeta meta;
    meta.row_dim = 1;
    meta.index_encoding = encoding;
    const std::vector<uint32_t> rows = {0, 0xfffffffeu, 0xffffffffu};
    const std::vector<float> values = {1.0f, 2.0f, 3.0f};
    std::vector<uint8_t> bytes;
    std::vector<EncodedPacket> packets;
    ASSERT_TRUE(protocol::EncodeSparsePackets(meta, rows, values, 1 << 16,
                                              &bytes, &packets)
                    .ok());
    SparsePacketExpectations expect;
    expect.table_rows = uint64_t{1} << 32;
    std::vector<uint32_t> got_rows;
    std::vector<float> got_values;
    const Status s = protocol::gpu::DecodePacketToHost(bytes, expect, &got_rows,
                                                       &got_values);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(got_rows, rows);
    EXPECT_EQ(got_values, values);
    // One row fewer in the table: the last is out of range.
    expect.table_rows = 0xffffffffu;
    EXPECT_EQ(
        protocol::gpu::DecodePacketToHost(bytes, expect, &got_rows, &got_values)
            .code(),
        StatusCode::kOutOfRange);
  }
}

TEST(DeviceDecoderTest, MalformedPacketsGetTheHostDecodersStatus) {
  SKIP_WITHOUT_GPU();
  for (uint32_t dim : {1u, 4u, 40u}) {
    const SparsePacketExpectations expect =
        ::ps::testing::BadPacketExpectations(dim);
    for (const auto& bad : ::ps::testing::BadPackets(dim)) {
      const std::string what = bad.name + " (dim " + std::to_string(dim) + ")";
      std::vector<uint32_t> rows(1 << 10);
      std::vector<float> values(size_t{1 << 10} * dim);
      const Status host = protocol::DecodeSparsePacket(bad.bytes, expect, rows,
                                                       values, nullptr);
      ASSERT_EQ(host.code(), bad.code) << what << ": " << host.ToString();
      const Status device =
          protocol::gpu::DecodePacketToHost(bad.bytes, expect, &rows, &values);
      EXPECT_EQ(device.code(), host.code())
          << what << ": device " << device.ToString() << ", host "
          << host.ToString();
    }
  }
}

TEST(DeviceDecoderTest, TheMalformedPacketsAreRefusedByTheHostDecoder) {
  // The cases' own check, on the CPU alone: runs here.
  for (uint32_t dim : {1u, 4u, 40u}) {
    const SparsePacketExpectations expect =
        ::ps::testing::BadPacketExpectations(dim);
    for (const auto& bad : ::ps::testing::BadPackets(dim)) {
      std::vector<uint32_t> rows(1 << 10);
      std::vector<float> values(size_t{1 << 10} * dim);
      const Status host = protocol::DecodeSparsePacket(bad.bytes, expect, rows,
                                                       values, nullptr);
      EXPECT_EQ(host.code(), bad.code)
          << bad.name << " (dim " << dim << "): " << host.ToString();
    }
  }
}

TEST(DeviceDecoderTest, AnUnknownEncodingIsInvalidArgument) {
  // Checked before anything touches CUDA: runs here.
  protocol::SparsePacketHeader h;
  h.row_count = 10;
  h.index_bytes = 10;
  h.meta.index_encoding = static_cast<IndexEncoding>(7);
  size_t bytes = 0;
  EXPECT_EQ(protocol::gpu::DecodeScratchBytes(h, &bytes).code(),
            StatusCode::kInvalidArgument);
  h.meta.index_encoding = IndexEncoding::kRawU32;
  h.meta.value_type = static_cast<ValueType>(9);
  EXPECT_EQ(protocol::gpu::DecodeScratchBytes(h, &bytes).code(),
            StatusCode::kInvalidArgument);
}

TEST(DeviceDecoderTest, ScratchIsSizedForEveryEncoding) {
  SKIP_WITHOUT_GPU();  // CUB asks the device when it sizes its scans
  protocol::SparsePacketHeader h;
  h.row_count = 1000;
  h.meta.row_dim = 16;
  h.index_bytes = 4000;
  h.meta.index_encoding = IndexEncoding::kRawU32;
  size_t raw = 0, varint = 0;
  ASSERT_TRUE(protocol::gpu::DecodeScratchBytes(h, &raw).ok());
  EXPECT_GE(raw, 1000 * 4 + 16000 * 4 + 8);
  h.meta.index_encoding = IndexEncoding::kDeltaVarint;
  h.index_bytes = 1500;
  ASSERT_TRUE(protocol::gpu::DecodeScratchBytes(h, &varint).ok());
  EXPECT_GT(varint, raw);  // the scan arrays and CUB's storage
}

}  // namespace
}  // namespace ps::kernels
