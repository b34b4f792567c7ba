// Malformed sparse packets with correct checksums, one per rule the decoder
// checks after the checksum (protocol/sparse_packet.h), for the tests that
// hold a decoder other than protocol::DecodeSparsePacket (the device
// decoder, DeviceParamTable::ApplyPacket) to the host decoder's answer. Each
// case says which status code the host decoder gives; the tests also check
// that it still does, so a change of the host rules shows here first.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/status.h"
#include "protocol/internal/sparse_packet_layout.h"
#include "protocol/sparse_packet.h"

namespace ps::testing {

struct BadPacket {
  std::string name;
  std::vector<uint8_t> bytes;
  StatusCode code;  // what protocol::DecodeSparsePacket says
};

// A packet of `row_count` rows of dim `dim` with the index section `index`
// (as is: any bytes) and the value section `values` (as is: scales and
// values, unpadded); header, padding and checksum as the encoder writes
// them.
inline std::vector<uint8_t> RawPacket(const protocol::SparsePacketMeta& meta,
                                      uint32_t row_count,
                                      const std::vector<uint8_t>& index,
                                      const std::vector<uint8_t>& values) {
  namespace layout = protocol::internal;
  const size_t values_at =
      protocol::kSparsePacketHeaderBytes + layout::Align4(index.size());
  const size_t size = values_at + layout::Align4(values.size());
  std::vector<uint8_t> p(size, 0);
  std::memcpy(p.data() + protocol::kSparsePacketHeaderBytes, index.data(),
              index.size());
  std::memcpy(p.data() + values_at, values.data(), values.size());
  layout::WriteHeader(meta, row_count, static_cast<uint32_t>(index.size()),
                      size, p.data());
  return p;
}

inline std::vector<uint8_t> Fp32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(4 * v.size());
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<uint8_t> U32Bytes(const std::vector<uint32_t>& v) {
  std::vector<uint8_t> b(4 * v.size());
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The cases, for a table of `table_rows` (>= 100) rows of dim `dim`, table
// id and shard 0 (meta otherwise default).
inline std::vector<BadPacket> BadPackets(uint32_t dim) {
  using protocol::IndexEncoding;
  using protocol::SparsePacketMeta;
  const StatusCode kCorrupt = StatusCode::kCorruption;
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  const StatusCode kRange = StatusCode::kOutOfRange;
  SparsePacketMeta varint;
  varint.row_dim = dim;
  varint.value_type = kernels::ValueType::kFp32;
  varint.index_encoding = IndexEncoding::kDeltaVarint;
  varint.int8_block = 0;
  SparsePacketMeta raw = varint;
  raw.index_encoding = IndexEncoding::kRawU32;
  auto ones = [&](uint32_t rows) {
    return Fp32Bytes(std::vector<float>(size_t{rows} * dim, 1.0f));
  };
  std::vector<BadPacket> cases;
  auto add = [&](std::string name, std::vector<uint8_t> bytes,
                 StatusCode code) {
    cases.push_back({std::move(name), std::move(bytes), code});
  };
  // Index section.
  add("varint over 32 bits",
      RawPacket(varint, 1, {0x80, 0x80, 0x80, 0x80, 0x10}, ones(1)), kCorrupt);
  add("six-byte varint",
      RawPacket(varint, 2, {0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x01}, ones(2)),
      kCorrupt);
  add("varint over 32 bits, not first",
      RawPacket(varint, 2, {0x01, 0xff, 0xff, 0xff, 0xff, 0x1f}, ones(2)),
      kCorrupt);
  add("section ends inside an index",
      RawPacket(varint, 3, {0x01, 0x01, 0x81}, ones(3)), kCorrupt);
  add("too few indices", RawPacket(varint, 3, {0x81, 0x01, 0x01}, ones(3)),
      kCorrupt);
  add("too many indices", RawPacket(varint, 2, {0x01, 0x01, 0x01}, ones(2)),
      kCorrupt);
  add("index_bytes too short for the indices",
      RawPacket(varint, 2, {0x01, 0xc7}, ones(2)), kCorrupt);
  add("varint delta 0 after the first",
      RawPacket(varint, 3, {0x05, 0x01, 0x00}, ones(3)), kInvalid);
  add("first varint 0 is fine, second 0 is not",
      RawPacket(varint, 2, {0x00, 0x00}, ones(2)), kInvalid);
  add("raw indices repeat", RawPacket(raw, 2, U32Bytes({5, 5}), ones(2)),
      kInvalid);
  add("raw indices decrease", RawPacket(raw, 3, U32Bytes({5, 9, 3}), ones(3)),
      kInvalid);
  add("not increasing beats out of range",
      RawPacket(raw, 2, U32Bytes({500, 3}), ones(2)), kInvalid);
  add("varint row past the table",
      RawPacket(varint, 2, {0x01, 0xc7, 0x01}, ones(2)), kRange);
  add("raw row past the table", RawPacket(raw, 2, U32Bytes({10, 100}), ones(2)),
      kRange);
  add("raw row 2^32 - 1", RawPacket(raw, 1, U32Bytes({0xffffffffu}), ones(1)),
      kRange);
  add("varint rows summing past 2^32",
      RawPacket(varint, 2,
                {0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0x0f},
                ones(2)),
      kRange);
  // Row 50, then 50 + 0xffffffff: a 32-bit sum would wrap to 49, a row of
  // the table, and the delta is not 0, so only a sum kept in 64 bits sees it.
  add("varint rows wrapping past 2^32 back into the table",
      RawPacket(varint, 2, {0x32, 0xff, 0xff, 0xff, 0xff, 0x0f}, ones(2)),
      kRange);
  // Values.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> with_nan(size_t{2} * dim, 1.0f);
  with_nan.back() = nan;
  add("fp32 NaN", RawPacket(varint, 2, {0x01, 0x01}, Fp32Bytes(with_nan)),
      kCorrupt);
  std::vector<float> with_inf(size_t{2} * dim, 1.0f);
  with_inf.front() = -inf;
  add("fp32 -Inf", RawPacket(raw, 2, U32Bytes({0, 1}), Fp32Bytes(with_inf)),
      kCorrupt);
  add("out of range beats a NaN",
      RawPacket(raw, 2, U32Bytes({0, 1000}), Fp32Bytes(with_nan)), kRange);
  SparsePacketMeta fp16 = varint;
  fp16.value_type = kernels::ValueType::kFp16;
  std::vector<uint8_t> fp16_values(2 * size_t{2} * dim, 0);
  fp16_values[2 * dim] = 0x00;  // row 1, value 0: +Inf (0x7c00)
  fp16_values[2 * dim + 1] = 0x7c;
  add("fp16 Inf", RawPacket(fp16, 2, {0x03, 0x04}, fp16_values), kCorrupt);
  SparsePacketMeta bf16 = varint;
  bf16.value_type = kernels::ValueType::kBf16;
  std::vector<uint8_t> bf16_values(2 * size_t{2} * dim, 0);
  bf16_values[0] = 0xc0;  // value 0: NaN (0x7fc0)
  bf16_values[1] = 0x7f;
  add("bf16 NaN", RawPacket(bf16, 2, {0x03, 0x04}, bf16_values), kCorrupt);
  // int8: one block of all the values; scales first.
  SparsePacketMeta int8 = varint;
  int8.value_type = kernels::ValueType::kInt8;
  int8.int8_block = 2 * dim;
  auto int8_section = [&](float scale, int8_t first) {
    std::vector<uint8_t> b = Fp32Bytes({scale});
    for (uint32_t i = 0; i < 2 * dim; ++i) {
      b.push_back(static_cast<uint8_t>(i == 0 ? first : 1));
    }
    return b;
  };
  add("int8 scale NaN", RawPacket(int8, 2, {0x01, 0x01}, int8_section(nan, 1)),
      kCorrupt);
  add("int8 scale negative",
      RawPacket(int8, 2, {0x01, 0x01}, int8_section(-1.0f, 1)), kCorrupt);
  add("int8 value -128",
      RawPacket(int8, 2, {0x01, 0x01}, int8_section(0.5f, -128)), kCorrupt);
  add("int8 value overflowing to Inf",
      RawPacket(int8, 2, {0x01, 0x01},
                int8_section(std::numeric_limits<float>::max(), 127)),
      kCorrupt);
  return cases;
}

// Expectations for those cases: a table of 100 rows of dim `dim`.
inline protocol::SparsePacketExpectations BadPacketExpectations(uint32_t dim) {
  protocol::SparsePacketExpectations expect;
  expect.table_rows = 100;
  expect.row_dim = dim;
  expect.table_id = 0;
  expect.shard_id = 0;
  return expect;
}

}  // namespace ps::testing
