// The sparse packet header: writing it, parsing and validating it, and the
// whole-packet checks (checksum, padding) that need nothing but the header.
#include <cstdio>
#include <string>

#include "kernels/checksum.h"
#include "protocol/internal/sparse_packet_layout.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol {
namespace internal {

uint64_t ChecksumOf(const uint8_t* packet, size_t size) {
  return kernels::Xxh3Seeded(packet + kChecksummedFrom, size - kChecksummedFrom,
                             LoadU64(packet));
}

Status CheckMeta(const SparsePacketMeta& meta, PacketIndex kind) {
  if (meta.row_dim == 0) return InvalidArgument("row_dim must be >= 1");
  if (!kernels::IsValidValueType(static_cast<uint8_t>(meta.value_type)))
    return InvalidArgument("unknown value type " +
                           std::to_string(static_cast<int>(meta.value_type)));
  const bool known = meta.index_encoding == IndexEncoding::kDeltaVarint ||
                     meta.index_encoding == IndexEncoding::kRawU32 ||
                     IsKeyed(meta.index_encoding);
  if (!known || (kind == PacketIndex::kKeys) != IsKeyed(meta.index_encoding))
    return InvalidArgument(
        "index encoding " +
        std::to_string(static_cast<int>(meta.index_encoding)) +
        (known ? " is not one of this encoder's" : " is unknown"));
  if (meta.value_type == ValueType::kInt8 &&
      (meta.int8_block == 0 || meta.int8_block > kMaxInt8Block))
    return InvalidArgument("int8_block " + std::to_string(meta.int8_block) +
                           " is not in [1, " + std::to_string(kMaxInt8Block) +
                           "]");
  return Status::OK();
}

void WriteHeader(const SparsePacketMeta& meta, uint32_t row_count,
                 uint32_t index_bytes, size_t packet_bytes, uint8_t* p) {
  const bool int8 = meta.value_type == ValueType::kInt8;
  StoreU32(p + kOffMagic, kSparsePacketMagic);
  p[kOffVersion] = kSparsePacketVersion;
  p[kOffValueType] = static_cast<uint8_t>(meta.value_type);
  p[kOffIndexEncoding] = static_cast<uint8_t>(meta.index_encoding);
  p[kOffFlags] = 0;
  StoreU32(p + kOffTable, meta.table_id);
  StoreU32(p + kOffShard, meta.shard_id);
  StoreU32(p + kOffSender, meta.sender_id);
  StoreU32(p + kOffRowDim, meta.row_dim);
  StoreU64(p + kOffStep, meta.step);
  StoreU32(p + kOffRowCount, row_count);
  StoreU32(p + kOffIndexBytes, index_bytes);
  StoreU32(p + kOffPayloadBytes,
           static_cast<uint32_t>(packet_bytes - kSparsePacketHeaderBytes));
  StoreU32(p + kOffInt8Block, int8 ? meta.int8_block : 0);
  StoreU64(p + kOffChecksum, ChecksumOf(p, packet_bytes));
}

Status CheckChecksumAndPadding(std::span<const uint8_t> packet,
                               const SparsePacketHeader& h) {
  uint64_t sum = ChecksumOf(packet.data(), packet.size());
  if (sum != h.checksum) {
    char buf[96];
    std::snprintf(
        buf, sizeof buf,
        "checksum mismatch: header says %016llx, content hashes to %016llx",
        static_cast<unsigned long long>(h.checksum),
        static_cast<unsigned long long>(sum));
    return Corruption(buf);
  }
  // Padding after the index section and after the values must be zero.
  const uint8_t* idx = packet.data() + kSparsePacketHeaderBytes;
  for (uint64_t i = h.index_bytes; i < Align4(h.index_bytes); ++i)
    if (idx[i] != 0)
      return Corruption("nonzero padding after the index section");
  const uint64_t values = uint64_t{h.row_count} * h.meta.row_dim;
  const uint64_t used = Align4(h.index_bytes) + 4 * ScaleCount(h.meta, values) +
                        values * kernels::ValueTypeBytes(h.meta.value_type);
  for (uint64_t i = used; i < h.payload_bytes; ++i)
    if (idx[i] != 0) return Corruption("nonzero padding after the values");
  return Status::OK();
}

}  // namespace internal

namespace {

using namespace internal;  // NOLINT: this file implements the layout

// The expectation checks, one per field, so the parser runs them in its
// order and CheckSparsePacketExpectations in the same order.
Status CheckRowDim(const SparsePacketMeta& m,
                   const SparsePacketExpectations& expect) {
  if (expect.row_dim != 0 && m.row_dim != expect.row_dim)
    return InvalidArgument("row_dim " + Num(m.row_dim) + " but table has " +
                           Num(expect.row_dim));
  return Status::OK();
}

Status CheckTableAndShard(const SparsePacketMeta& m,
                          const SparsePacketExpectations& expect) {
  if (expect.table_id >= 0 &&
      m.table_id != static_cast<uint64_t>(expect.table_id))
    return InvalidArgument("packet for table " + Num(m.table_id) +
                           " arrived for table " + Num(expect.table_id));
  if (expect.shard_id >= 0 &&
      m.shard_id != static_cast<uint64_t>(expect.shard_id))
    return InvalidArgument("packet for shard " + Num(m.shard_id) +
                           " arrived at shard " + Num(expect.shard_id));
  return Status::OK();
}

Status CheckIndexKind(const SparsePacketMeta& m,
                      const SparsePacketExpectations& expect) {
  const bool keyed = IsKeyed(m.index_encoding);
  if (expect.index == PacketIndex::kRows && keyed)
    return InvalidArgument("keyed packet arrived for a table of rows");
  if (expect.index == PacketIndex::kKeys && !keyed)
    return InvalidArgument("packet of rows arrived for a keyed table");
  return Status::OK();
}

Status CheckRowCount(const SparsePacketHeader& h,
                     const SparsePacketExpectations& expect) {
  if (h.row_count > expect.max_row_count)
    return OutOfRange("packet has " + Num(h.row_count) +
                      " rows, more than the " + Num(expect.max_row_count) +
                      " the receiver takes");
  return Status::OK();
}

}  // namespace

size_t MaxSparsePacketBytes(const SparsePacketMeta& meta, size_t row_count) {
  const uint64_t per_index = meta.index_encoding == IndexEncoding::kRawU32 ? 4
                             : IsKeyed(meta.index_encoding)                ? 10
                                                                           : 5;
  const uint64_t index_bytes = per_index * row_count;
  return kSparsePacketHeaderBytes +
         PayloadBytes(meta, index_bytes, uint64_t{row_count} * meta.row_dim);
}

StatusOr<SparsePacketHeader> ParseSparsePacketHeader(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect) {
  if (packet.size() < kSparsePacketHeaderBytes)
    return Corruption("packet of " + Num(packet.size()) +
                      " bytes is shorter than the " +
                      Num(kSparsePacketHeaderBytes) + "-byte header");
  const uint8_t* p = packet.data();
  uint32_t magic = LoadU32(p + kOffMagic);
  if (magic != kSparsePacketMagic)
    return Corruption("bad magic 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%08x", magic);
      return std::string(buf);
    }() + " (not a sparse packet)");
  if (p[kOffVersion] != kSparsePacketVersion)
    return InvalidArgument("unsupported packet version " + Num(p[kOffVersion]) +
                           " (this build reads " + Num(kSparsePacketVersion) +
                           ")");
  if (!kernels::IsValidValueType(p[kOffValueType]))
    return InvalidArgument("unknown value type " + Num(p[kOffValueType]));
  uint8_t enc = p[kOffIndexEncoding];
  if (enc != static_cast<uint8_t>(IndexEncoding::kDeltaVarint) &&
      enc != static_cast<uint8_t>(IndexEncoding::kRawU32) &&
      !IsKeyed(static_cast<IndexEncoding>(enc)))
    return InvalidArgument("unknown index encoding " + Num(enc));
  if (p[kOffFlags] != 0)
    return InvalidArgument("unknown flags 0x" + Num(p[kOffFlags]));

  SparsePacketHeader h;
  h.meta.value_type = static_cast<ValueType>(p[kOffValueType]);
  h.meta.index_encoding = static_cast<IndexEncoding>(enc);
  h.meta.table_id = LoadU32(p + kOffTable);
  h.meta.shard_id = LoadU32(p + kOffShard);
  h.meta.sender_id = LoadU32(p + kOffSender);
  h.meta.row_dim = LoadU32(p + kOffRowDim);
  h.meta.step = LoadU64(p + kOffStep);
  h.meta.int8_block = LoadU32(p + kOffInt8Block);
  h.row_count = LoadU32(p + kOffRowCount);
  h.index_bytes = LoadU32(p + kOffIndexBytes);
  h.payload_bytes = LoadU32(p + kOffPayloadBytes);
  h.checksum = LoadU64(p + kOffChecksum);
  const SparsePacketMeta& m = h.meta;

  if (m.row_dim == 0) return InvalidArgument("row_dim is 0");
  PS_RETURN_IF_ERROR(CheckIndexKind(m, expect));
  PS_RETURN_IF_ERROR(CheckRowDim(m, expect));
  PS_RETURN_IF_ERROR(CheckTableAndShard(m, expect));
  if (m.value_type == ValueType::kInt8) {
    if (m.int8_block == 0 || m.int8_block > kMaxInt8Block)
      return InvalidArgument("int8_block " + Num(m.int8_block) +
                             " is not in [1, " + Num(kMaxInt8Block) + "]");
  } else if (m.int8_block != 0) {
    return InvalidArgument("int8_block " + Num(m.int8_block) + " set for " +
                           std::string(kernels::ValueTypeName(m.value_type)) +
                           " values");
  }
  if (h.row_count == 0) return InvalidArgument("row_count is 0 (empty packet)");
  PS_RETURN_IF_ERROR(CheckRowCount(h, expect));
  if (h.payload_bytes != packet.size() - kSparsePacketHeaderBytes)
    return Corruption("payload_bytes " + Num(h.payload_bytes) + " but " +
                      Num(packet.size() - kSparsePacketHeaderBytes) +
                      " bytes follow the header");
  // Every value takes at least one byte: bound the product before using it.
  const uint64_t values = uint64_t{h.row_count} * m.row_dim;
  if (values > h.payload_bytes)
    return Corruption(Num(h.row_count) + " rows of dimension " +
                      Num(m.row_dim) + " cannot fit in " +
                      Num(h.payload_bytes) + " payload bytes");
  if (m.index_encoding == IndexEncoding::kRawU32) {
    if (h.index_bytes != 4 * uint64_t{h.row_count})
      return Corruption("index_bytes " + Num(h.index_bytes) + " but " +
                        Num(h.row_count) + " raw uint32 indices take " +
                        Num(4 * uint64_t{h.row_count}));
  } else if (h.index_bytes < h.row_count ||
             h.index_bytes >
                 (IsKeyed(m.index_encoding) ? 10 : 5) * uint64_t{h.row_count}) {
    return Corruption("index_bytes " + Num(h.index_bytes) + " cannot hold " +
                      Num(h.row_count) + " varint indices");
  }
  uint64_t want = PayloadBytes(m, h.index_bytes, values);
  if (want != h.payload_bytes)
    return Corruption("payload_bytes " + Num(h.payload_bytes) + " but " +
                      Num(h.row_count) + " rows x " + Num(m.row_dim) + " " +
                      std::string(kernels::ValueTypeName(m.value_type)) +
                      " with " + Num(h.index_bytes) + " index bytes take " +
                      Num(want));
  return h;
}

Status CheckSparsePacketExpectations(const SparsePacketHeader& header,
                                     const SparsePacketExpectations& expect) {
  PS_RETURN_IF_ERROR(CheckIndexKind(header.meta, expect));
  PS_RETURN_IF_ERROR(CheckRowDim(header.meta, expect));
  PS_RETURN_IF_ERROR(CheckTableAndShard(header.meta, expect));
  return CheckRowCount(header, expect);
}

}  // namespace ps::protocol
