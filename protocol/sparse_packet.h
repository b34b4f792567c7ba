// The sparse-gradient packet: the wire format a worker writes into a server
// inbox slot and the server validates before it touches a single row.
//
// A packet carries `row_count` rows of one table shard: their sorted row
// indices (uint32 within the shard) and their `row_dim` values each. Layout,
// all integers little-endian, no padding:
//
//   offset size field
//        0    4 magic            "PSGP" (0x50475350 read as little-endian u32)
//        4    1 version          kSparsePacketVersion
//        5    1 value_type       ValueType (fp32, fp16, bf16, int8)
//        6    1 index_encoding   IndexEncoding
//        7    1 flags            must be 0 in this version
//        8    8 checksum         XXH3-64 of bytes [16, end) seeded with the
//                                u64 at [0, 8): covers everything but itself
//       16    4 table_id
//       20    4 shard_id
//       24    4 sender_id        worker that sent it (for logs and counters)
//       28    4 row_dim          values per row, >= 1
//       32    8 step             the sender's training step
//       40    4 row_count        >= 1 (an empty gradient gives no packet)
//       44    4 index_bytes      length of the index section
//       48    4 payload_bytes    length of everything after the header
//       52    4 int8_block       values per int8 scale; 0 for other types
//       56      payload:
//                 index section  (index_bytes, then zero padding to a
//                                 multiple of 4)
//                 int8 scales    (fp32, Int8BlockCount(row_count*row_dim,
//                                 int8_block) of them; int8 only)
//                 values         row-major, row_count * row_dim values, then
//                                 zero padding to a multiple of 4
//
// So payload_bytes = align4(index_bytes) + 4 * scales + align4(value bytes),
// a packet's size is a multiple of 4, and a packet that starts 4-byte aligned
// has aligned values (the decoder also accepts unaligned packets).
//
// Index encodings: kDeltaVarint stores each row index as the difference to
// the previous one (the first as the index itself) in LEB128 varint, so
// strictly increasing indices have deltas >= 1 (0 is invalid after the first).
// kRawU32 stores plain little-endian uint32 values.
//
// Keyed packets (kKeyDeltaVarint) carry keys instead of rows, for a table
// that finds a key's row itself (an EXACT table): row_count keys, uint64,
// strictly increasing, each stored as the difference to the previous one
// (the first as the key itself) in LEB128 varint of at most 10 bytes; the
// rest of the packet is as above (row_dim values per key). The two kinds
// never mix: a receiver says which it takes (SparsePacketExpectations::
// index), and the row encodings' packets are what they were before keyed
// packets existed, byte for byte. kKeyHashDeltaVarint is the same section
// over KeyHash(key) (protocol/key_hash.h) instead of the key: the keys go
// in the order the server files them in (strictly increasing hashes), and
// the decoder gives back the keys. Workers send it to servers that say
// they take it (ClusterInfo.keys_in_hash_order).
//
// kKeyHashFixedDeltas carries the same hashes in a section a decoder reads
// without a chain from one key to the next: a width byte w (1-8), the
// first hash as 8 bytes, then each later hash as its difference to the one
// before (>= 1) in w bytes, so index_bytes = 9 + (row_count - 1) * w. Hashes
// in order lie about 2^64 / n apart with no outliers to speak of, so w
// is the bytes a varint takes (6 for a 10M-key push, 7 for a training
// step's) while each key is read with one load and a mask: 1.6 ns a key
// instead of 6.3-7.4 for the varints (10M keys, one thread). Workers send
// it to servers that say they take it (ClusterInfo.fixed_hash_deltas).
//
// At 1% density with fp16 values a row costs about 1.3 index bytes + 2 value
// bytes, against 6 for a plain uint32 + fp16 pair.
//
// This file is the format and its validation; the arithmetic (varints,
// quantization) is in kernels/varint_index.h and kernels/value_section.h.
// All functions are pure over caller memory: thread-safe, and they allocate
// only where a comment says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "kernels/quantize.h"

namespace ps::protocol {

using kernels::kDefaultInt8Block;
using kernels::ValueType;

inline constexpr uint32_t kSparsePacketMagic = 0x50475350;  // "PSGP"
inline constexpr uint8_t kSparsePacketVersion = 1;
inline constexpr size_t kSparsePacketHeaderBytes = 56;

enum class IndexEncoding : uint8_t {
  kDeltaVarint = 1,
  kRawU32 = 2,
  kKeyDeltaVarint = 3,      // keys, not rows (see above)
  kKeyHashDeltaVarint = 4,  // keys as their KeyHash, in its order
  kKeyHashFixedDeltas = 5,  // the same hashes, deltas of one width
};

// Whether an encoding carries keys as their KeyHash (ascending).
constexpr bool IsKeyHashes(IndexEncoding encoding) {
  return encoding == IndexEncoding::kKeyHashDeltaVarint ||
         encoding == IndexEncoding::kKeyHashFixedDeltas;
}

// Whether an encoding carries keys.
constexpr bool IsKeyed(IndexEncoding encoding) {
  return encoding == IndexEncoding::kKeyDeltaVarint || IsKeyHashes(encoding);
}

// What a packet is about; the encoder writes it into every packet it makes.
struct SparsePacketMeta {
  uint32_t table_id = 0;
  uint32_t shard_id = 0;
  uint32_t sender_id = 0;
  uint64_t step = 0;
  uint32_t row_dim = 1;
  ValueType value_type = ValueType::kFp32;
  IndexEncoding index_encoding = IndexEncoding::kDeltaVarint;
  uint32_t int8_block = kDefaultInt8Block;  // used for kInt8 only
};

// A parsed and validated header.
struct SparsePacketHeader {
  SparsePacketMeta meta;
  uint32_t row_count = 0;
  uint32_t index_bytes = 0;
  uint32_t payload_bytes = 0;
  uint64_t checksum = 0;
  // kSparsePacketHeaderBytes + payload_bytes.
  size_t packet_bytes() const {
    return kSparsePacketHeaderBytes + payload_bytes;
  }
};

// One packet inside an encoder's output buffer.
struct EncodedPacket {
  size_t offset = 0;       // where it starts in the output buffer
  size_t size = 0;         // its length in bytes
  size_t first_row = 0;    // position of its first row in the input rows
  uint32_t row_count = 0;  // rows it carries
};

// Upper bound of the size of one packet holding `row_count` rows (keys, for
// a keyed encoding).
size_t MaxSparsePacketBytes(const SparsePacketMeta& meta, size_t row_count);

// Encodes `rows` (strictly increasing) and `values` (rows.size() * row_dim
// floats, row-major) into packets of at most `max_packet_bytes` each, one
// after another in `out` (cleared first; its capacity is reused), and lists
// them in `packets` (cleared first). Every packet is self-contained: its own
// header, checksum and first index. For int8, packets are cut only where the
// value count so far is a multiple of int8_block, so each packet's blocks are
// the blocks of the whole push (RoundTrip over all values gives exactly what
// the receiver decodes). Empty `rows` gives no packet and OK.
// The first packet starts at `headroom` (a multiple of 4; its bytes before
// are unspecified): a sender that writes a few bytes of its own in front of
// each packet, as InboxWriter does, then has room before the first one too
// and copies none.
// Errors: InvalidArgument (unsorted or duplicate rows, values size mismatch,
// bad meta, max_packet_bytes too small for one row or one int8 block,
// headroom not a multiple of 4).
Status EncodeSparsePackets(const SparsePacketMeta& meta,
                           std::span<const uint32_t> rows,
                           std::span<const float> values,
                           size_t max_packet_bytes, std::vector<uint8_t>* out,
                           std::vector<EncodedPacket>* packets,
                           size_t headroom = 0);

// Which packets a receiver takes.
enum class PacketIndex : uint8_t {
  kRows,  // row packets (kDeltaVarint, kRawU32)
  kKeys,  // keyed packets (kKeyDeltaVarint, kKeyHashDeltaVarint)
  kAny,   // either: a receiver that looks at the header first
};

// What the receiver knows and the packet must agree with.
struct SparsePacketExpectations {
  uint64_t table_rows = 0;              // every row index must be < table_rows
  uint32_t row_dim = 0;                 // 0: any; else must match
  int64_t table_id = -1;                // -1: any; else must match
  int64_t shard_id = -1;                // -1: any; else must match
  uint32_t max_row_count = UINT32_MAX;  // rows the caller can take at once
  // A packet of the other kind is kInvalidArgument. table_rows does not
  // bound keys.
  PacketIndex index = PacketIndex::kRows;
};

// Checks the header alone (magic, version, types, lengths against
// packet.size(), row_dim, table/shard, row_count); does not verify the
// checksum or the payload. Use it to size buffers before DecodeSparsePacket.
StatusOr<SparsePacketHeader> ParseSparsePacketHeader(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect);

// The table fields of `expect` (index, row_dim, table_id, shard_id,
// max_row_count) checked against a header ParseSparsePacketHeader returned,
// with the same statuses it gives: for a caller that parsed with loose
// expectations to find the table and now knows what to expect.
Status CheckSparsePacketExpectations(const SparsePacketHeader& header,
                                     const SparsePacketExpectations& expect);

// Validates everything and decodes into caller buffers: `rows_out` needs
// row_count entries, `values_out` row_count * row_dim floats (dequantized).
// packet.size() must be the packet's exact length. Nothing is allocated. On
// error the output buffers may hold partial data and must be ignored.
// Errors:
//  - Corruption: shorter than a header, bad magic, length fields disagreeing
//    with each other or with packet.size(), checksum mismatch, malformed or
//    over-long varint, index section not ending where index_bytes says,
//    nonzero padding, non-finite value or int8 scale, int8 value -128
//  - InvalidArgument: unknown version, value type, index encoding or flags,
//    bad int8_block, row_dim or table/shard not what `expect` says,
//    row_count 0, row indices not strictly increasing
//  - OutOfRange: a row index >= expect.table_rows (or >= 2^32); output
//    buffers too small; more rows than expect.max_row_count
// Messages say which field and values were wrong.
Status DecodeSparsePacket(std::span<const uint8_t> packet,
                          const SparsePacketExpectations& expect,
                          std::span<uint32_t> rows_out,
                          std::span<float> values_out,
                          SparsePacketHeader* header_out);

// Validates the whole packet first, then calls fn(row, values) once per row
// in increasing row order (values: row_dim floats, valid during the call).
// No row is reported unless the whole packet is valid. Allocates nothing for
// row_dim <= 2048; beyond that one buffer of row_dim floats.
// The same for a packet whose header the caller has already parsed (with
// ParseSparsePacketHeader, from these very bytes): checks `header` against
// `expect` (CheckSparsePacketExpectations) instead of parsing it again, then
// verifies checksum and payload and decodes as above.
Status DecodeSparsePacket(std::span<const uint8_t> packet,
                          const SparsePacketHeader& header,
                          const SparsePacketExpectations& expect,
                          std::span<uint32_t> rows_out,
                          std::span<float> values_out);

Status DecodeSparsePacketRows(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect,
    const std::function<void(uint32_t row, const float* values)>& fn,
    SparsePacketHeader* header_out);

// Keyed packets: EncodeSparsePackets for `keys` (strictly increasing) in
// packets of meta.index_encoding when IsKeyHashes says it carries hashes
// (then `keys` are the keys' KeyHash, and the decoder gives back the
// keys), else of kKeyDeltaVarint (set here, whatever else meta says). The
// same errors, for keys.
Status EncodeKeyedPackets(const SparsePacketMeta& meta,
                          std::span<const uint64_t> keys,
                          std::span<const float> values,
                          size_t max_packet_bytes, std::vector<uint8_t>* out,
                          std::vector<EncodedPacket>* packets,
                          size_t headroom = 0);

// DecodeSparsePacket for a keyed packet whose header the caller parsed:
// `keys_out` gets row_count keys (of a packet of hashes, the keys of its
// hashes, in the packet's order). Given `hashes_out` (row_count or more),
// a packet of hashes leaves them there too, ascending, so that the
// receiver need not hash its keys again; other packets leave it as it was.
// Checks `header` against `expect` (whose index must admit keys). The
// errors of DecodeSparsePacket, and Corruption for a varint longer than 10
// bytes, a width outside 1-8 or a key past 2^64.
Status DecodeKeyedPacket(std::span<const uint8_t> packet,
                         const SparsePacketHeader& header,
                         const SparsePacketExpectations& expect,
                         std::span<uint64_t> keys_out,
                         std::span<float> values_out,
                         std::span<uint64_t> hashes_out = {});

}  // namespace ps::protocol
