// Internal to protocol/sparse_packet_*.cc: the header's field offsets and the
// size arithmetic the encoder and the decoder share (the layout itself is
// documented in protocol/sparse_packet.h). Pure functions: thread-safe.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol::internal {

static_assert(std::endian::native == std::endian::little,
              "the packet format is little-endian and read in place");

// Header field offsets (see the layout in sparse_packet.h).
inline constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffValueType = 5,
                        kOffIndexEncoding = 6, kOffFlags = 7, kOffChecksum = 8,
                        kOffTable = 16, kOffShard = 20, kOffSender = 24,
                        kOffRowDim = 28, kOffStep = 32, kOffRowCount = 40,
                        kOffIndexBytes = 44, kOffPayloadBytes = 48,
                        kOffInt8Block = 52;
inline constexpr size_t kChecksummedFrom = 16;
// The largest int8 block a packet may declare: keeps per-block work bounded.
inline constexpr uint32_t kMaxInt8Block = 1u << 20;

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void StoreU64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

constexpr uint64_t Align4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

inline std::string Num(uint64_t v) { return std::to_string(v); }

inline uint64_t ScaleCount(const SparsePacketMeta& meta, uint64_t values) {
  return meta.value_type == ValueType::kInt8
             ? kernels::Int8BlockCount(values, meta.int8_block)
             : 0;
}

// Bytes after the header for a packet with these index bytes and values.
inline uint64_t PayloadBytes(const SparsePacketMeta& meta, uint64_t index_bytes,
                             uint64_t values) {
  return Align4(index_bytes) + 4 * ScaleCount(meta, values) +
         Align4(values * kernels::ValueTypeBytes(meta.value_type));
}

// XXH3-64 of bytes [16, size) seeded with the u64 at [0, 8).
uint64_t ChecksumOf(const uint8_t* packet, size_t size);

// Checks an encoder's meta (InvalidArgument naming the field), whose index
// encoding must be of the kind the encoder writes.
Status CheckMeta(const SparsePacketMeta& meta, PacketIndex kind);

// Bytes of `v` as a LEB128 varint (1 to 10).
constexpr uint32_t Varint64Bytes(uint64_t v) {
  // 7 bits a byte, without a loop (it ran once per key of every packet).
  return (static_cast<uint32_t>(std::bit_width(v | 1)) + 6) / 7;
}

// Writes the header of a packet of `packet_bytes` whose payload is already
// in place, checksum last.
void WriteHeader(const SparsePacketMeta& meta, uint32_t row_count,
                 uint32_t index_bytes, size_t packet_bytes, uint8_t* p);

// After a successful header parse: the checksum, and zero padding after the
// index section and after the values.
Status CheckChecksumAndPadding(std::span<const uint8_t> packet,
                               const SparsePacketHeader& h);

// After the checksum and the index section checked out: the value section
// (int8 scales, dequantized values, all finite) into values_out, which
// holds row_count * row_dim floats.
Status DecodeValues(std::span<const uint8_t> packet,
                    const SparsePacketHeader& h, std::span<float> values_out);

// The checks both encoders make first: `meta` (of encoder kind `kind`),
// `headroom` (a multiple of 4), `values` floats for `n` rows or keys.
Status CheckEncodeArgs(const SparsePacketMeta& meta, PacketIndex kind,
                       size_t headroom, size_t n, size_t values);

// Appends the packet a cut found, rows or keys [start, end) in `size`
// bytes at *total, and adds its size to *total; kInvalidArgument saying
// that one `what` ("row", "key") does not fit when end == start.
Status AddCutPacket(const SparsePacketMeta& meta, size_t max_packet_bytes,
                    const char* what, size_t start, size_t end, uint64_t size,
                    size_t* total, std::vector<EncodedPacket>* packets);

// Writes the rest of packet `pk` at `p` once its index section is in place
// (index_bytes long): the padding after it, the value section of its rows'
// `values` (all of the push's values), the padding after that, then the
// header (checksum last).
void FinishPacket(const SparsePacketMeta& meta, const EncodedPacket& pk,
                  uint32_t index_bytes, std::span<const float> values,
                  uint8_t* p);

// Where the packets of a push end: greedy, each packet grows row by row
// while it fits in `max_packet_bytes`; int8 packets end only where the
// values so far fill whole blocks. Appends one EncodedPacket (offset, size,
// first row, row count) per packet to *packets and returns the bytes of
// them all. `rows` strictly increasing (the caller checked); the encoder
// and the device packer (kernels/cuda/device_packer.cu) both cut here, so
// their packets are the same. kInvalidArgument when one row cannot fit.
StatusOr<size_t> CutPackets(const SparsePacketMeta& meta,
                            std::span<const uint32_t> rows,
                            size_t max_packet_bytes,
                            std::vector<EncodedPacket>* packets);

}  // namespace ps::protocol::internal
