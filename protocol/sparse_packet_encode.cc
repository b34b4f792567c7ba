// The sparse packet encoder: cuts a push into packets that fit a slot and
// writes each one (indices, values, header).
#include <algorithm>
#include <cstring>

#include "kernels/value_section.h"
#include "kernels/varint_index.h"
#include "protocol/internal/sparse_packet_layout.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol {

using namespace internal;  // NOLINT: this file implements the layout

namespace internal {

StatusOr<size_t> CutPackets(const SparsePacketMeta& meta,
                            std::span<const uint32_t> rows,
                            size_t max_packet_bytes,
                            std::vector<EncodedPacket>* packets) {
  const uint64_t dim = meta.row_dim;
  const size_t n = rows.size();
  const bool varint = meta.index_encoding == IndexEncoding::kDeltaVarint;
  const bool int8 = meta.value_type == ValueType::kInt8;
  const uint64_t limit = std::min<uint64_t>(
      max_packet_bytes, kSparsePacketHeaderBytes + uint64_t{UINT32_MAX} - 3);
  // Fixed-width values grow by the same bytes per row, so only int8 needs
  // PayloadBytes' block count per row.
  const uint64_t row_value_bytes =
      dim * kernels::ValueTypeBytes(meta.value_type);
  const uint32_t* r = rows.data();
  size_t total = 0;
  for (size_t start = 0; start < n;) {
    uint64_t index_bytes = 0;
    size_t end = start, good_end = start;
    uint64_t good_size = 0;
    if (!int8) {
      // Fixed-width values: a packet's size only grows with its rows, so
      // whole blocks of rows that still fit are taken at once (a loop
      // without a branch per row), then the last rows one by one below.
      constexpr size_t kBlock = 64;
      while (n - end >= kBlock && end + kBlock - start <= UINT32_MAX) {
        uint64_t block = 0;
        if (varint) {
          // Summed in 32 bits (at most 5 * kBlock), which vectorises four
          // or more rows to an instruction without widening.
          uint32_t sizes = 0;
          for (size_t i = end + 1; i < end + kBlock; ++i) {
            sizes +=
                static_cast<uint32_t>(kernels::VarintBytes(r[i] - r[i - 1]));
          }
          block = sizes + kernels::VarintBytes(
                              end == start ? r[end] : r[end] - r[end - 1]);
        } else {
          block = 4 * kBlock;
        }
        const uint64_t size = kSparsePacketHeaderBytes +
                              Align4(index_bytes + block) +
                              Align4((end + kBlock - start) * row_value_bytes);
        if (size > limit) break;
        index_bytes += block;
        end += kBlock;
        good_end = end;
        good_size = size;
      }
    }
    while (end < n && end - start < UINT32_MAX) {
      uint32_t delta = end == start ? rows[end] : rows[end] - rows[end - 1];
      uint64_t next_index =
          index_bytes + (varint ? kernels::VarintBytes(delta) : 4);
      const uint64_t rows_in = end + 1 - start;
      uint64_t size =
          kSparsePacketHeaderBytes +
          (int8 ? PayloadBytes(meta, next_index, rows_in * dim)
                : Align4(next_index) + Align4(rows_in * row_value_bytes));
      if (size > limit) break;
      index_bytes = next_index;
      ++end;
      if (!int8 || end == n || (end * dim) % meta.int8_block == 0) {
        good_end = end;
        good_size = size;
      }
    }
    PS_RETURN_IF_ERROR(AddCutPacket(meta, max_packet_bytes, "row", start,
                                    good_end, good_size, &total, packets));
    start = good_end;
  }
  return total;
}

Status CheckEncodeArgs(const SparsePacketMeta& meta, PacketIndex kind,
                       size_t headroom, size_t n, size_t values) {
  PS_RETURN_IF_ERROR(CheckMeta(meta, kind));
  if (headroom % 4 != 0)
    return InvalidArgument("headroom " + Num(headroom) +
                           " is not a multiple of 4");
  const uint64_t dim = meta.row_dim;
  if (values != n * dim)
    return InvalidArgument("values has " + Num(values) + " floats, " + Num(n) +
                           (kind == PacketIndex::kKeys ? " keys" : " rows") +
                           " of dimension " + Num(dim) + " need " +
                           Num(n * dim));
  return Status::OK();
}

Status AddCutPacket(const SparsePacketMeta& meta, size_t max_packet_bytes,
                    const char* what, size_t start, size_t end, uint64_t size,
                    size_t* total, std::vector<EncodedPacket>* packets) {
  if (end == start) {
    const bool int8 = meta.value_type == ValueType::kInt8;
    return InvalidArgument(
        "max_packet_bytes " + Num(max_packet_bytes) + " cannot hold one " +
        what + " of dimension " + Num(meta.row_dim) +
        (int8 ? " (whole int8 blocks of " + Num(meta.int8_block) + ")" : ""));
  }
  packets->push_back(EncodedPacket{*total, static_cast<size_t>(size), start,
                                   static_cast<uint32_t>(end - start)});
  *total += size;
  return Status::OK();
}

void FinishPacket(const SparsePacketMeta& meta, const EncodedPacket& pk,
                  uint32_t index_bytes, std::span<const float> values,
                  uint8_t* p) {
  uint8_t* idx = p + kSparsePacketHeaderBytes;
  uint8_t* vals = idx + Align4(index_bytes);
  std::memset(idx + index_bytes, 0, vals - (idx + index_bytes));
  const size_t count = size_t{pk.row_count} * meta.row_dim;
  kernels::WriteValueSection(meta.value_type, meta.int8_block,
                             values.data() + pk.first_row * meta.row_dim, count,
                             vals);
  uint8_t* vend = vals + 4 * ScaleCount(meta, count) +
                  count * kernels::ValueTypeBytes(meta.value_type);
  std::memset(vend, 0, p + pk.size - vend);
  WriteHeader(meta, pk.row_count, index_bytes, pk.size, p);
}

}  // namespace internal

namespace {

// EncodeSparsePackets, but `out` keeps its old bytes where the packets do
// not need it (it is resized, never cleared: a clear and a resize would
// zero the whole buffer first on every call).
Status EncodeInto(const SparsePacketMeta& meta, std::span<const uint32_t> rows,
                  std::span<const float> values, size_t max_packet_bytes,
                  size_t headroom, std::vector<uint8_t>* out,
                  std::vector<EncodedPacket>* packets) {
  packets->clear();
  const size_t n = rows.size();
  PS_RETURN_IF_ERROR(
      CheckEncodeArgs(meta, PacketIndex::kRows, headroom, n, values.size()));
  if (n == 0) return Status::OK();
  // One branch-free pass (it vectorises), then the position for the
  // message only when it failed.
  uint32_t increasing = 1;
  for (size_t i = 1; i < n; ++i) increasing &= rows[i] > rows[i - 1] ? 1 : 0;
  if (increasing == 0) {
    size_t i = 1;
    while (rows[i] > rows[i - 1]) ++i;
    return InvalidArgument("rows are not strictly increasing at position " +
                           Num(i) + ": " + Num(rows[i - 1]) + " then " +
                           Num(rows[i]));
  }
  const bool varint = meta.index_encoding == IndexEncoding::kDeltaVarint;
  // Pass 1: where the packets end.
  PS_ASSIGN_OR_RETURN(const size_t total,
                      CutPackets(meta, rows, max_packet_bytes, packets));

  // Pass 2: write. Packet sizes and the headroom are multiples of 4, so
  // every packet, and the value section inside it, stays 4-byte aligned in
  // the buffer. Every byte of the packets is written below, padding
  // included.
  for (EncodedPacket& pk : *packets) pk.offset += headroom;
  out->resize(headroom + total);
  for (const EncodedPacket& pk : *packets) {
    uint8_t* p = out->data() + pk.offset;
    uint8_t* idx = p + kSparsePacketHeaderBytes;
    uint8_t* w = idx;
    const uint32_t* r = rows.data() + pk.first_row;
    if (varint) {
      w = kernels::PutDeltaVarints(r, pk.row_count, w);
    } else {
      std::memcpy(w, r, 4 * size_t{pk.row_count});
      w += 4 * size_t{pk.row_count};
    }
    FinishPacket(meta, pk, static_cast<uint32_t>(w - idx), values, p);
  }
  return Status::OK();
}

}  // namespace

Status EncodeSparsePackets(const SparsePacketMeta& meta,
                           std::span<const uint32_t> rows,
                           std::span<const float> values,
                           size_t max_packet_bytes, std::vector<uint8_t>* out,
                           std::vector<EncodedPacket>* packets,
                           size_t headroom) {
  Status s =
      EncodeInto(meta, rows, values, max_packet_bytes, headroom, out, packets);
  if (!s.ok() || packets->empty()) out->clear();
  return s;
}

}  // namespace ps::protocol
