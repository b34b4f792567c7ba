// DeviceParamTable::ApplyPacket (packets decoded on the device) against the
// host decode (protocol::DecodeSparsePacket) followed by Apply: exactly the
// same tables with integer gradients for every value type and both index
// encodings, and every malformed packet (tests/protocol/bad_packets.h, plus a
// checksum mismatch and a wrong row_dim) refused with the host decoder's
// status code and the table, its optimizer state and step count untouched.
// Every test that needs a GPU skips, saying why, when none is usable; the
// test that runs here checks that no table (so no ApplyPacket) can be had
// then, with kNotSupported.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "protocol/sparse_packet.h"
#include "protocol/table_config.h"
#include "table/device_param_table.h"
#include "tests/protocol/bad_packets.h"
#include "tests/table/skip_without_gpu.h"

namespace ps::table {
namespace {

using protocol::EncodedPacket;
using protocol::IndexEncoding;
using protocol::SparsePacketExpectations;
using protocol::SparsePacketMeta;

proto::TableSpec TableWith(const std::string& optimizer, uint32_t dim) {
  auto config = protocol::ParseTableConfig(
      "table { id: 1 name: \"t\" dim: " + std::to_string(dim) +
      " capacity: 1000 " + optimizer + " }");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config->table(0);
}

struct Snapshot {
  std::vector<float> values;
  std::vector<float> state[kernels::kMaxOptimizerStates];
  uint64_t steps = 0;
  bool operator==(const Snapshot&) const = default;
};

Snapshot Copy(const DeviceParamTable& t) {
  Snapshot s;
  const Status status = t.CopyTo(&s.values, s.state, &s.steps);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return s;
}

TEST(DeviceApplyPacketTest, WithoutADeviceThereIsNoTableToApplyTo) {
  const Status available = DeviceParamTable::Available();
  if (available.ok()) GTEST_SKIP() << "a CUDA device is usable here";
  // No table can be made, so no packet reaches ApplyPacket: the server's
  // --device refuses to start instead (and the stub's ApplyPacket says
  // kNotSupported, like every member of the stub).
  auto t = DeviceParamTable::Create(TableWith("", 4), 0, 100);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotSupported);
}

TEST(DeviceApplyPacketTest, EqualsHostDecodeAndApplyForEveryTypeAndEncoding) {
  SKIP_WITHOUT_GPU();
  for (const std::string optimizer :
       {"", "optimizer { name: \"sgd\" learning_rate: 0.5 }",
        "optimizer { name: \"adagrad\" learning_rate: 0.1 }",
        "optimizer { name: \"adam\" learning_rate: 0.01 }"}) {
    for (kernels::ValueType type :
         {kernels::ValueType::kFp32, kernels::ValueType::kFp16,
          kernels::ValueType::kBf16, kernels::ValueType::kInt8}) {
      for (IndexEncoding encoding :
           {IndexEncoding::kDeltaVarint, IndexEncoding::kRawU32}) {
        const uint32_t dim = 16;
        SCOPED_TRACE(optimizer + " " +
                     std::string(kernels::ValueTypeName(type)) +
                     (encoding == IndexEncoding::kRawU32 ? " raw" : " varint"));
        const proto::TableSpec spec = TableWith(optimizer, dim);
        auto by_packet = DeviceParamTable::Create(spec, 0, 5000).value();
        auto by_rows = DeviceParamTable::Create(spec, 0, 5000).value();
        SparsePacketMeta meta;
        meta.table_id = 1;
        meta.row_dim = dim;
        meta.value_type = type;
        meta.index_encoding = encoding;
        meta.int8_block = type == kernels::ValueType::kInt8 ? 64 : 0;
        std::mt19937 rng(static_cast<uint32_t>(type) * 7 +
                         static_cast<uint32_t>(encoding));
        for (int push = 0; push < 3; ++push) {
          // Integer gradients in [-8, 8]: exact in fp32, fp16 and bf16; int8
          // dequantizes them to nearby floats, the same bits on both paths.
          std::vector<uint32_t> rows;
          for (uint32_t r = rng() % 7; r < 5000; r += 1 + rng() % 40) {
            rows.push_back(r);
          }
          std::vector<float> grads;
          for (size_t i = 0; i < rows.size() * dim; ++i) {
            grads.push_back(
                static_cast<float>(static_cast<int>(rng() % 17) - 8));
          }
          std::vector<uint8_t> bytes;
          std::vector<EncodedPacket> packets;
          ASSERT_TRUE(protocol::EncodeSparsePackets(meta, rows, grads, 16 << 10,
                                                    &bytes, &packets)
                          .ok());
          SparsePacketExpectations expect;
          expect.table_rows = 5000;
          expect.row_dim = dim;
          expect.table_id = 1;
          for (const EncodedPacket& pk : packets) {
            const std::span<const uint8_t> packet(bytes.data() + pk.offset,
                                                  pk.size);
            protocol::SparsePacketHeader header;
            const Status s = by_packet->ApplyPacket(packet, expect, &header);
            ASSERT_TRUE(s.ok()) << s.ToString();
            EXPECT_EQ(header.row_count, pk.row_count);
            std::vector<uint32_t> host_rows(pk.row_count);
            std::vector<float> host_values(size_t{pk.row_count} * dim);
            ASSERT_TRUE(protocol::DecodeSparsePacket(packet, expect, host_rows,
                                                     host_values, nullptr)
                            .ok());
            ASSERT_TRUE(by_rows->Apply(host_rows, host_values).ok());
          }
        }
        // The same kernels over the same rows and value bits: the same
        // floats, for the stateful optimizers too.
        EXPECT_EQ(Copy(*by_packet), Copy(*by_rows));
      }
    }
  }
}

TEST(DeviceApplyPacketTest, MalformedPacketsAreRefusedAndChangeNothing) {
  SKIP_WITHOUT_GPU();
  for (const std::string optimizer :
       {"", "optimizer { name: \"adam\" learning_rate: 0.01 }"}) {
    for (uint32_t dim : {1u, 4u}) {
      auto t =
          DeviceParamTable::Create(TableWith(optimizer, dim), 0, 100).value();
      // One good packet first, so the optimizer state is not all initial.
      SparsePacketMeta meta;
      meta.row_dim = dim;
      std::vector<uint8_t> good;
      std::vector<EncodedPacket> packets;
      ASSERT_TRUE(
          protocol::EncodeSparsePackets(meta, std::vector<uint32_t>{2, 50},
                                        std::vector<float>(2 * dim, 1.0f),
                                        1 << 16, &good, &packets)
              .ok());
      SparsePacketExpectations expect =
          ::ps::testing::BadPacketExpectations(dim);
      ASSERT_TRUE(t->ApplyPacket(good, expect, nullptr).ok());
      const Snapshot before = Copy(*t);

      std::vector<::ps::testing::BadPacket> cases =
          ::ps::testing::BadPackets(dim);
      std::vector<uint8_t> bad_sum = good;
      bad_sum[protocol::kSparsePacketHeaderBytes] ^= 1;  // checksum mismatch
      cases.push_back({"checksum mismatch", bad_sum, StatusCode::kCorruption});
      SparsePacketMeta wide = meta;
      wide.row_dim = dim + 1;
      std::vector<uint8_t> wrong_dim;
      ASSERT_TRUE(
          protocol::EncodeSparsePackets(wide, std::vector<uint32_t>{1},
                                        std::vector<float>(dim + 1, 1.0f),
                                        1 << 16, &wrong_dim, &packets)
              .ok());
      cases.push_back(
          {"row_dim not the table's", wrong_dim, StatusCode::kInvalidArgument});
      for (const auto& bad : cases) {
        SCOPED_TRACE(optimizer + " dim " + std::to_string(dim) + ": " +
                     bad.name);
        const Status s = t->ApplyPacket(bad.bytes, expect, nullptr);
        EXPECT_EQ(s.code(), bad.code) << s.ToString();
        EXPECT_EQ(Copy(*t), before);
      }
      // And the table still takes good packets.
      ASSERT_TRUE(t->ApplyPacket(good, expect, nullptr).ok());
      EXPECT_EQ(t->optimizer_steps(),
                before.steps + (optimizer.empty() ? 0 : 1));
    }
  }
}

}  // namespace
}  // namespace ps::table
