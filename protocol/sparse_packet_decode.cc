// The sparse packet decoder: validates a whole packet (header, checksum,
// padding, indices, values) before it hands out a single row.
#include <algorithm>
#include <vector>

#include "kernels/value_section.h"
#include "kernels/varint_index.h"
#include "protocol/internal/sparse_packet_layout.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol {
namespace {

using namespace internal;  // NOLINT: this file implements the layout

// Decodes and validates the index section into `out` (row_count entries)
// or, when kStore is false, only validates it.
template <bool kStore>
Status DecodeIndices(const SparsePacketHeader& h, const uint8_t* section,
                     const SparsePacketExpectations& expect, uint32_t* out) {
  const uint32_t n = h.row_count;
  const bool raw = h.meta.index_encoding == IndexEncoding::kRawU32;
  kernels::DeltaVarintSummary summary;
  if (raw) {
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t v = LoadU32(section + 4 * size_t{i});
      summary.zero_delta |= (i > 0) & (v <= prev);
      prev = v;
      if constexpr (kStore) out[i] = v;
    }
    summary.last = prev;
  } else {
    PS_RETURN_IF_ERROR(kernels::DecodeDeltaVarints<kStore>(
        section, h.index_bytes, n, out, &summary));
  }
  if (summary.zero_delta) {
    // Rare: find where, for the message.
    uint64_t prev = 0, cur = 0;
    const uint8_t* q = section;
    for (uint32_t i = 0; i < n; ++i) {
      if (raw) {
        cur = LoadU32(q + 4 * size_t{i});
      } else {
        uint32_t d = kernels::ReadValidatedVarint(&q);
        cur = i == 0 ? d : prev + d;
      }
      if (i > 0 && cur <= prev)
        return InvalidArgument("row indices not strictly increasing at " +
                               Num(i) + ": " + Num(prev) + " then " + Num(cur));
      prev = cur;
    }
    return InvalidArgument("row indices not strictly increasing");
  }
  // Indices increase, so the last is the largest.
  const uint64_t row = summary.last;
  if (row > UINT32_MAX || row >= expect.table_rows)
    return OutOfRange("row index " + Num(row) + " is outside the table's " +
                      Num(expect.table_rows) + " rows");
  return Status::OK();
}

Status CheckScales(const SparsePacketHeader& h, const uint8_t* vals,
                   uint64_t total_values) {
  if (h.meta.value_type != ValueType::kInt8) return Status::OK();
  return kernels::CheckInt8Section(h.meta.int8_block, vals, total_values);
}

void DequantizeRange(const SparsePacketHeader& h, const uint8_t* vals,
                     uint64_t total_values, uint64_t first, size_t count,
                     float* out) {
  kernels::ReadValueRange(h.meta.value_type, h.meta.int8_block, vals,
                          total_values, first, count, out);
}

// Everything but the decode of a header parsed from `packet`.
Status DecodeParsed(std::span<const uint8_t> packet,
                    const SparsePacketHeader& h,
                    const SparsePacketExpectations& expect,
                    std::span<uint32_t> rows_out, std::span<float> values_out) {
  if (IsKeyed(h.meta.index_encoding))
    return InvalidArgument("keyed packet given to the row decoder");
  PS_RETURN_IF_ERROR(CheckChecksumAndPadding(packet, h));
  const uint64_t values = uint64_t{h.row_count} * h.meta.row_dim;
  if (rows_out.size() < h.row_count || values_out.size() < values)
    return OutOfRange("packet has " + Num(h.row_count) + " rows x " +
                      Num(h.meta.row_dim) + " values; output buffers hold " +
                      Num(rows_out.size()) + " rows and " +
                      Num(values_out.size()) + " values");
  const uint8_t* idx = packet.data() + kSparsePacketHeaderBytes;
  PS_RETURN_IF_ERROR(DecodeIndices<true>(h, idx, expect, rows_out.data()));
  return DecodeValues(packet, h, values_out);
}

}  // namespace

namespace internal {

Status DecodeValues(std::span<const uint8_t> packet,
                    const SparsePacketHeader& h, std::span<float> values_out) {
  const uint64_t values = uint64_t{h.row_count} * h.meta.row_dim;
  const uint8_t* vals =
      packet.data() + kSparsePacketHeaderBytes + Align4(h.index_bytes);
  PS_RETURN_IF_ERROR(CheckScales(h, vals, values));
  DequantizeRange(h, vals, values, 0, values, values_out.data());
  if (!kernels::AllFinite(values_out.data(), values))
    return Corruption("packet carries a non-finite value");
  return Status::OK();
}

}  // namespace internal

Status DecodeSparsePacket(std::span<const uint8_t> packet,
                          const SparsePacketExpectations& expect,
                          std::span<uint32_t> rows_out,
                          std::span<float> values_out,
                          SparsePacketHeader* header_out) {
  PS_ASSIGN_OR_RETURN(SparsePacketHeader h,
                      ParseSparsePacketHeader(packet, expect));
  PS_RETURN_IF_ERROR(DecodeParsed(packet, h, expect, rows_out, values_out));
  if (header_out != nullptr) *header_out = h;
  return Status::OK();
}

Status DecodeSparsePacket(std::span<const uint8_t> packet,
                          const SparsePacketHeader& header,
                          const SparsePacketExpectations& expect,
                          std::span<uint32_t> rows_out,
                          std::span<float> values_out) {
  PS_RETURN_IF_ERROR(CheckSparsePacketExpectations(header, expect));
  return DecodeParsed(packet, header, expect, rows_out, values_out);
}

Status DecodeSparsePacketRows(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect,
    const std::function<void(uint32_t row, const float* values)>& fn,
    SparsePacketHeader* header_out) {
  PS_ASSIGN_OR_RETURN(SparsePacketHeader h,
                      ParseSparsePacketHeader(packet, expect));
  if (IsKeyed(h.meta.index_encoding))
    return InvalidArgument("keyed packet given to the row decoder");
  PS_RETURN_IF_ERROR(CheckChecksumAndPadding(packet, h));
  const uint64_t dim = h.meta.row_dim;
  const uint64_t values = uint64_t{h.row_count} * dim;
  const uint8_t* idx = packet.data() + kSparsePacketHeaderBytes;
  const uint8_t* vals = idx + Align4(h.index_bytes);
  PS_RETURN_IF_ERROR(DecodeIndices<false>(h, idx, expect, nullptr));
  PS_RETURN_IF_ERROR(CheckScales(h, vals, values));

  constexpr size_t kStackFloats = 2048;
  float stack_buf[kStackFloats];
  std::vector<float> heap_buf;
  float* buf = stack_buf;
  uint64_t rows_per_chunk = kStackFloats / dim;
  if (rows_per_chunk == 0) {
    heap_buf.resize(dim);
    buf = heap_buf.data();
    rows_per_chunk = 1;
  }
  // Pass 1 (validation): every value finite, before any row is reported.
  for (uint64_t r = 0; r < h.row_count; r += rows_per_chunk) {
    size_t count = static_cast<size_t>(
        std::min<uint64_t>(rows_per_chunk, h.row_count - r) * dim);
    DequantizeRange(h, vals, values, r * dim, count, buf);
    if (!kernels::AllFinite(buf, count))
      return Corruption("packet carries a non-finite value");
  }
  // Pass 2: report. The packet is known to be valid now.
  const uint8_t* p = idx;
  uint64_t row = 0;
  for (uint64_t r = 0; r < h.row_count; r += rows_per_chunk) {
    uint64_t chunk_rows = std::min<uint64_t>(rows_per_chunk, h.row_count - r);
    DequantizeRange(h, vals, values, r * dim,
                    static_cast<size_t>(chunk_rows * dim), buf);
    for (uint64_t k = 0; k < chunk_rows; ++k) {
      if (h.meta.index_encoding == IndexEncoding::kRawU32) {
        row = LoadU32(p);
        p += 4;
      } else {
        uint32_t d = kernels::ReadValidatedVarint(&p);
        row = (r + k == 0) ? d : row + d;
      }
      fn(static_cast<uint32_t>(row), buf + k * dim);
    }
  }
  if (header_out != nullptr) *header_out = h;
  return Status::OK();
}

}  // namespace ps::protocol
