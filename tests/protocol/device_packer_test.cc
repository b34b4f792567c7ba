// The device packer (protocol/cuda/device_packer.h) against the CPU path the
// worker takes: the rows selected as error feedback selects them
// (kernels/sparse_detect.h), encoded by protocol::EncodeSparsePackets. The
// device must give the same rows and the same bytes, and the decoder must
// accept them. Every test skips, saying why, when no CUDA device is present.
#include "protocol/cuda/device_packer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/gpu_kernels.h"
#include "kernels/sparse_detect.h"
#include "protocol/sparse_packet.h"
#include "tests/kernels/gpu_test_support.h"

namespace ps::kernels {
namespace {

using protocol::EncodedPacket;
using protocol::IndexEncoding;
using protocol::gpu::DevicePacker;
using protocol::gpu::DevicePackOptions;
using protocol::gpu::DevicePackResult;
using protocol::gpu::RowSelection;

using gpu::testing::Upload;

// Rows of several kinds: zero rows, tiny rows (fp16 subnormals), large
// rows, copies of the row before (equal norms: top-k ties) and ordinary
// ones, with a negative zero in row 0.
std::vector<float> RowGradients(size_t rows, uint32_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(rows * dim);
  for (size_t r = 0; r < rows; ++r) {
    float* row = g.data() + r * dim;
    const uint32_t kind = rng() % 10;
    for (uint32_t j = 0; j < dim; ++j) {
      switch (kind) {
        case 0:
          row[j] = 0.0f;
          break;
        case 1:
          row[j] = normal(rng) * 1e-6f;
          break;
        case 2:
          row[j] = normal(rng) * 1e3f;
          break;
        case 3:
          row[j] = r > 0 ? (row - dim)[j] : 1.0f;
          break;
        default:
          row[j] = normal(rng);
      }
    }
  }
  if (!g.empty()) g[0] = -0.0f;
  return g;
}

DevicePackOptions Options(uint32_t dim, ValueType type, IndexEncoding encoding,
                          RowSelection selection) {
  DevicePackOptions o;
  o.meta.table_id = 7;
  o.meta.shard_id = 3;
  o.meta.sender_id = 11;
  o.meta.step = 123456789012ull;
  o.meta.row_dim = dim;
  o.meta.value_type = type;
  o.meta.index_encoding = encoding;
  o.selection = selection;
  o.max_packet_bytes = size_t{1} << 26;
  return o;
}

std::string Describe(const DevicePackOptions& o) {
  return "dim=" + std::to_string(o.meta.row_dim) +
         " type=" + std::string(ValueTypeName(o.meta.value_type)) +
         " encoding=" +
         std::to_string(static_cast<int>(o.meta.index_encoding)) +
         (o.selection == RowSelection::kTopK
              ? " top-k k=" + std::to_string(o.k)
              : " threshold eps=" + std::to_string(o.epsilon)) +
         (o.norm == RowNorm::kL2 ? " L2" : " max-abs") +
         " max_packet_bytes=" + std::to_string(o.max_packet_bytes);
}

// The worker's CPU path: ErrorFeedback's selection (|g| for one value per
// row, else the row norm), then the host encoder.
struct HostPacked {
  std::vector<uint32_t> rows;
  std::vector<uint8_t> bytes;
  std::vector<EncodedPacket> packets;
};

Status HostPack(const std::vector<float>& g, const DevicePackOptions& o,
                HostPacked* out) {
  const uint32_t dim = o.meta.row_dim;
  if (o.selection == RowSelection::kThreshold) {
    PS_RETURN_IF_ERROR(dim == 1
                           ? DetectThreshold(g, o.epsilon, nullptr, &out->rows)
                           : DetectRowsThreshold(g, dim, o.norm, o.epsilon,
                                                 nullptr, &out->rows));
  } else {
    PS_RETURN_IF_ERROR(
        dim == 1 ? DetectTopK(g, o.k, nullptr, &out->rows)
                 : DetectRowsTopK(g, dim, o.norm, o.k, nullptr, &out->rows));
  }
  std::vector<float> values;
  for (uint32_t r : out->rows) {
    values.insert(values.end(), g.begin() + size_t{r} * dim,
                  g.begin() + (size_t{r} + 1) * dim);
  }
  return protocol::EncodeSparsePackets(o.meta, out->rows, values,
                                       o.max_packet_bytes, &out->bytes,
                                       &out->packets);
}

// Packs `g` on the device and on the host and expects the same rows,
// packets and bytes; with `decode`, also that every packet decodes to its
// rows.
void ExpectSameAsHost(DevicePacker& packer, const std::vector<float>& g,
                      const DevicePackOptions& o, bool decode) {
  SCOPED_TRACE(Describe(o));
  const uint32_t dim = o.meta.row_dim;
  const uint64_t num_rows = g.size() / dim;
  HostPacked want;
  ASSERT_TRUE(HostPack(g, o, &want).ok());
  const gpu::DeviceBuffer grad = Upload(g);
  std::vector<uint8_t> bytes;
  DevicePackResult got;
  const Status s = packer.Pack(grad.as<float>(), num_rows, o, &bytes, &got);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(got.rows, want.rows);
  ASSERT_EQ(got.bytes, bytes.size());
  ASSERT_EQ(got.packets.size(), want.packets.size());
  for (size_t p = 0; p < want.packets.size(); ++p) {
    EXPECT_EQ(got.packets[p].offset, want.packets[p].offset) << "packet " << p;
    EXPECT_EQ(got.packets[p].size, want.packets[p].size) << "packet " << p;
    EXPECT_EQ(got.packets[p].first_row, want.packets[p].first_row);
    EXPECT_EQ(got.packets[p].row_count, want.packets[p].row_count);
  }
  ASSERT_EQ(bytes.size(), want.bytes.size());
  const auto diff =
      std::mismatch(bytes.begin(), bytes.end(), want.bytes.begin());
  EXPECT_TRUE(diff.first == bytes.end())
      << "first differing byte at offset " << (diff.first - bytes.begin());
  if (!decode) return;
  protocol::SparsePacketExpectations expect;
  expect.table_rows = num_rows;
  expect.row_dim = dim;
  expect.table_id = o.meta.table_id;
  expect.shard_id = o.meta.shard_id;
  for (const EncodedPacket& pk : got.packets) {
    std::vector<uint32_t> rows(pk.row_count);
    std::vector<float> values(size_t{pk.row_count} * dim);
    protocol::SparsePacketHeader header;
    const Status d = protocol::DecodeSparsePacket(
        std::span<const uint8_t>(bytes.data() + pk.offset, pk.size), expect,
        rows, values, &header);
    ASSERT_TRUE(d.ok()) << d;
    EXPECT_TRUE(
        std::equal(rows.begin(), rows.end(), got.rows.begin() + pk.first_row));
  }
}

const ValueType kTypes[] = {ValueType::kFp32, ValueType::kFp16,
                            ValueType::kBf16, ValueType::kInt8};
const IndexEncoding kEncodings[] = {IndexEncoding::kDeltaVarint,
                                    IndexEncoding::kRawU32};

TEST(CudaPackerTest, PacketsEqualTheHostEncoderForEveryTypeAndEncoding) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;  // one packer throughout: its scratch is reused
  for (uint32_t dim : {1u, 3u, 64u}) {
    const std::vector<float> g = RowGradients(1000, dim, dim);
    for (ValueType type : kTypes) {
      for (IndexEncoding encoding : kEncodings) {
        DevicePackOptions o =
            Options(dim, type, encoding, RowSelection::kThreshold);
        o.epsilon = 1.0f;
        ExpectSameAsHost(packer, g, o, /*decode=*/true);
        o.norm = RowNorm::kMaxAbs;
        o.epsilon = 0.8f;
        ExpectSameAsHost(packer, g, o, /*decode=*/true);
        o = Options(dim, type, encoding, RowSelection::kTopK);
        o.k = 97;
        ExpectSameAsHost(packer, g, o, /*decode=*/true);
      }
    }
  }
}

TEST(CudaPackerTest, CutsPacketsWhereTheHostEncoderDoes) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  // Sparse rows far apart: varint deltas of 1 to 3 bytes, and a first index
  // per packet written whole.
  const std::vector<float> wide = RowGradients(200000, 1, 5);
  const std::vector<float> rows3 = RowGradients(5000, 3, 6);
  for (ValueType type : kTypes) {
    for (IndexEncoding encoding : kEncodings) {
      for (size_t max : {size_t{56 + 64}, size_t{56 + 200}, size_t{4096}}) {
        DevicePackOptions o =
            Options(1, type, encoding, RowSelection::kThreshold);
        o.epsilon = 2.5f;
        o.max_packet_bytes = max + (type == ValueType::kInt8 ? 256 + 4 : 0);
        ExpectSameAsHost(packer, wide, o, /*decode=*/true);
        // dim 3 with int8 blocks of 64: cuts only where 3 * rows is a
        // multiple of 64.
        o = Options(3, type, encoding, RowSelection::kTopK);
        o.k = 1500;
        o.max_packet_bytes = max + (type == ValueType::kInt8 ? 1024 : 0);
        ExpectSameAsHost(packer, rows3, o, /*decode=*/true);
      }
    }
  }
}

TEST(CudaPackerTest, TooSmallPacketLimitIsTheEncodersError) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  const std::vector<float> g = RowGradients(100, 8, 7);
  const gpu::DeviceBuffer grad = Upload(g);
  DevicePackOptions o =
      Options(8, ValueType::kFp32, IndexEncoding::kRawU32, RowSelection::kTopK);
  o.k = 10;
  o.max_packet_bytes = 60;
  std::vector<uint8_t> bytes;
  DevicePackResult result;
  EXPECT_TRUE(packer.Pack(grad.as<float>(), 100, o, &bytes, &result)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(bytes.empty());
}

TEST(CudaPackerTest, SelectionEqualsTheCpuSelection) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  // Dimensions around the eight accumulator lanes of the L2 norm.
  for (uint32_t dim : {1u, 2u, 7u, 8u, 9u, 17u, 100u}) {
    const size_t rows = 3001;
    const std::vector<float> g = RowGradients(rows, dim, 100 + dim);
    for (RowNorm norm : {RowNorm::kL2, RowNorm::kMaxAbs}) {
      // Thresholds at measured norms, so rows sit exactly on the edge.
      std::vector<float> norms;
      ASSERT_TRUE(ComputeRowNorms(g, dim, norm, nullptr, &norms).ok());
      std::sort(norms.begin(), norms.end());
      for (float eps : {0.0f, norms[rows / 2], norms[rows - 10], 1e30f}) {
        DevicePackOptions o =
            Options(dim, ValueType::kFp32, IndexEncoding::kDeltaVarint,
                    RowSelection::kThreshold);
        o.norm = norm;
        o.epsilon = eps;
        ExpectSameAsHost(packer, g, o, /*decode=*/true);
      }
      for (size_t k : {size_t{1}, size_t{10}, rows / 3, rows - 1}) {
        DevicePackOptions o =
            Options(dim, ValueType::kFp16, IndexEncoding::kDeltaVarint,
                    RowSelection::kTopK);
        o.norm = norm;
        o.k = k;
        ExpectSameAsHost(packer, g, o, /*decode=*/true);
      }
    }
  }
}

TEST(CudaPackerTest, LargeShardsSelectAcrossManyTiles) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  const std::vector<float> g = RowGradients(1u << 20, 1, 8);
  DevicePackOptions o =
      Options(1, ValueType::kInt8, IndexEncoding::kDeltaVarint,
              RowSelection::kThreshold);
  o.epsilon = 3.0f;
  o.max_packet_bytes = 1 << 16;
  ExpectSameAsHost(packer, g, o, /*decode=*/true);
  o.selection = RowSelection::kTopK;
  o.k = 50000;
  ExpectSameAsHost(packer, g, o, /*decode=*/true);
}

TEST(CudaPackerTest, NoRowSelectedGivesNoPacket) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  const std::vector<float> g = RowGradients(500, 4, 9);
  const gpu::DeviceBuffer grad = Upload(g);
  std::vector<uint8_t> bytes(3, 0xff);
  DevicePackResult result;
  DevicePackOptions o =
      Options(4, ValueType::kFp16, IndexEncoding::kDeltaVarint,
              RowSelection::kThreshold);
  o.epsilon = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(packer.Pack(grad.as<float>(), 500, o, &bytes, &result).ok());
  EXPECT_TRUE(bytes.empty());
  EXPECT_TRUE(result.rows.empty());
  EXPECT_TRUE(result.packets.empty());
  EXPECT_EQ(result.bytes, 0u);
  o.selection = RowSelection::kTopK;
  o.k = 0;
  ASSERT_TRUE(packer.Pack(grad.as<float>(), 500, o, &bytes, &result).ok());
  EXPECT_TRUE(result.packets.empty());
  o.k = 5;  // no rows at all
  ASSERT_TRUE(packer.Pack(grad.as<float>(), 0, o, &bytes, &result).ok());
  EXPECT_TRUE(result.packets.empty());
  EXPECT_TRUE(bytes.empty());
}

TEST(CudaPackerTest, KBeyondTheRowsSendsEveryRow) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  const std::vector<float> g = RowGradients(300, 5, 10);
  for (size_t k : {size_t{300}, size_t{301}, size_t{1} << 40}) {
    DevicePackOptions o = Options(5, ValueType::kBf16, IndexEncoding::kRawU32,
                                  RowSelection::kTopK);
    o.k = k;
    ExpectSameAsHost(packer, g, o, /*decode=*/true);
  }
}

TEST(CudaPackerTest, NanRowsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (uint32_t dim : {1u, 4u}) {
    std::vector<float> g = RowGradients(400, dim, 11);
    for (size_t r : {5u, 17u, 200u}) g[r * dim] = nan;
    g[40 * dim] = inf;
    g[41 * dim] = -inf;
    DevicePackOptions o =
        Options(dim, ValueType::kFp32, IndexEncoding::kDeltaVarint,
                RowSelection::kThreshold);
    // A NaN measure never passes a threshold, not even 0.
    for (float eps : {0.0f, 0.5f}) {
      o.epsilon = eps;
      ExpectSameAsHost(packer, g, o, /*decode=*/false);
      HostPacked host;
      ASSERT_TRUE(HostPack(g, o, &host).ok());
      for (uint32_t r : {5u, 17u, 200u}) {
        EXPECT_FALSE(std::binary_search(host.rows.begin(), host.rows.end(), r));
      }
    }
    // Max-abs skips a NaN value and measures the rest of the row, and top-k
    // ranks a NaN measure like zero: the same rows as the CPU either way.
    o.norm = RowNorm::kMaxAbs;
    ExpectSameAsHost(packer, g, o, /*decode=*/false);
    o.selection = RowSelection::kTopK;
    o.norm = RowNorm::kL2;
    for (size_t k : {size_t{20}, size_t{399}}) {
      o.k = k;
      ExpectSameAsHost(packer, g, o, /*decode=*/false);
    }
  }
}

TEST(CudaPackerTest, ShortOutputIsOutOfRangeAndSaysTheSize) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  const std::vector<float> g = RowGradients(200, 2, 12);
  const gpu::DeviceBuffer grad = Upload(g);
  DevicePackOptions o = Options(
      2, ValueType::kFp16, IndexEncoding::kDeltaVarint, RowSelection::kTopK);
  o.k = 50;
  HostPacked want;
  ASSERT_TRUE(HostPack(g, o, &want).ok());
  std::vector<uint8_t> out(want.bytes.size() - 1);
  DevicePackResult result;
  EXPECT_TRUE(
      packer.Pack(grad.as<float>(), 200, o, std::span<uint8_t>(out), &result)
          .Is(StatusCode::kOutOfRange));
  EXPECT_EQ(result.bytes, want.bytes.size());
  out.resize(result.bytes);
  ASSERT_TRUE(
      packer.Pack(grad.as<float>(), 200, o, std::span<uint8_t>(out), &result)
          .ok());
  EXPECT_EQ(out, want.bytes);
}

TEST(CudaPackerTest, BadOptionsAreInvalidArgument) {
  SKIP_WITHOUT_GPU();
  DevicePacker packer;
  const std::vector<float> g = RowGradients(10, 1, 13);
  const gpu::DeviceBuffer grad = Upload(g);
  std::vector<uint8_t> bytes;
  DevicePackResult result;
  DevicePackOptions o =
      Options(1, ValueType::kFp32, IndexEncoding::kDeltaVarint,
              RowSelection::kThreshold);
  for (float eps : {-1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    o.epsilon = eps;
    EXPECT_TRUE(packer.Pack(grad.as<float>(), 10, o, &bytes, &result)
                    .Is(StatusCode::kInvalidArgument));
  }
  o.epsilon = 0.0f;
  o.meta.row_dim = 0;
  EXPECT_TRUE(packer.Pack(grad.as<float>(), 10, o, &bytes, &result)
                  .Is(StatusCode::kInvalidArgument));
  o.meta.row_dim = 1;
  EXPECT_TRUE(packer.Pack(nullptr, 10, o, &bytes, &result)
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(
      packer.Pack(grad.as<float>(), (uint64_t{1} << 32) + 1, o, &bytes, &result)
          .Is(StatusCode::kOutOfRange));
}

}  // namespace
}  // namespace ps::kernels
