// Keyed sparse packets (IndexEncoding::kKeyDeltaVarint, and
// kKeyHashDeltaVarint over the keys' hashes): the encoder and the decoder of
// an index section of uint64 keys. Header, checksum, padding
// and values are those of every packet (sparse_packet_header.cc,
// sparse_packet_decode.cc, kernels/value_section.h).
#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/value_section.h"
#include "protocol/internal/sparse_packet_layout.h"
#include "protocol/key_hash.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol {
namespace {

using namespace internal;  // NOLINT: this file implements the layout

static_assert(std::endian::native == std::endian::little,
              "varints are moved eight bytes at a time, low byte first");

// The low 56 bits of v as eight bytes of 7 bits each, low bits first: a
// varint's bytes without their continuation bits. Three halving steps
// (28-bit halves, 14-bit quarters, 7-bit bytes) rather than eight shifts.
inline uint64_t SpreadSevenBits(uint64_t v) {
  uint64_t w = (v & 0x000000000fffffffull) | ((v << 4) & 0x0fffffff00000000ull);
  w = (w & 0x00003fff00003fffull) | ((w << 2) & 0x3fff00003fff0000ull);
  return (w & 0x007f007f007f007full) | ((w << 1) & 0x7f007f007f007f00ull);
}

// The inverse: the 7-bit payloads of eight bytes (their top bits ignored),
// gathered in three steps.
inline uint64_t GatherSevenBits(uint64_t w) {
  w = (w & 0x007f007f007f007full) | ((w >> 1) & 0x3f803f803f803f80ull);
  w = (w & 0x00003fff00003fffull) | ((w >> 2) & 0x0fffc0000fffc000ull);
  return (w & 0x000000000fffffffull) | ((w >> 4) & 0x00fffffff0000000ull);
}

// Writes v as a varint at w; `end` bounds the buffer. A varint of up to 8
// bytes with 8 bytes of room goes in one store (the bytes past it are
// zeros, overwritten by what follows); else byte by byte. Keys in hash
// order have varints of 6-7 bytes, whose loop mispredicted once a key.
uint8_t* PutVarint64(uint64_t v, uint8_t* w, const uint8_t* end) {
  if (v < (uint64_t{1} << 56) && end - w >= 8) {
    const uint32_t n = Varint64Bytes(v);
    const uint64_t more = 0x8080808080808080ull &
                          ((uint64_t{1} << (8 * (n - 1))) - 1);  // all but last
    const uint64_t word = SpreadSevenBits(v) | more;
    std::memcpy(w, &word, 8);
    return w + n;
  }
  while (v >= 0x80) {
    *w++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *w++ = static_cast<uint8_t>(v);
  return w;
}

// One varint of [*p, end): false when it runs past `end`, past 64 bits, or
// is longer than it needs to be (a last byte of 0 after the first). With
// 8 bytes left, a varint that ends within them is read at once.
bool ReadVarint64(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  if (end - *p >= 8) {
    uint64_t word;
    std::memcpy(&word, *p, 8);
    const uint64_t stops = ~word & 0x8080808080808080ull;
    if (stops != 0) {
      const int n = std::countr_zero(stops) / 8 + 1;
      const uint64_t mine =
          n == 8 ? word : word & ((uint64_t{1} << (8 * n)) - 1);
      if (n > 1 && (mine >> (8 * (n - 1))) == 0) return false;  // over-long
      *v = GatherSevenBits(mine);
      *p += n;
      return true;
    }
  }
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p == end) return false;
    const uint8_t byte = *(*p)++;
    if (shift == 63 && byte > 1) return false;  // bits past 2^64
    result |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) {
      if (byte == 0 && shift > 0) return false;
      *v = result;
      return true;
    }
  }
  return false;
}

// Where the packets end, as CutPackets for rows: a packet grows key by key
// while it fits; int8 packets end only where the values so far fill whole
// blocks.
StatusOr<size_t> CutKeyedPackets(const SparsePacketMeta& meta,
                                 std::span<const uint64_t> keys,
                                 size_t max_packet_bytes,
                                 std::vector<EncodedPacket>* packets) {
  const uint64_t dim = meta.row_dim;
  const size_t n = keys.size();
  const bool int8 = meta.value_type == ValueType::kInt8;
  // PayloadBytes, its calls hoisted out of the per-key loop where the
  // values carry no scales.
  const uint64_t value_bytes = kernels::ValueTypeBytes(meta.value_type);
  const auto payload = [&](uint64_t index_bytes, uint64_t keys_in) {
    return int8 ? PayloadBytes(meta, index_bytes, keys_in * dim)
                : Align4(index_bytes) + Align4(keys_in * dim * value_bytes);
  };
  const uint64_t limit = std::min<uint64_t>(
      max_packet_bytes, kSparsePacketHeaderBytes + uint64_t{UINT32_MAX} - 3);
  size_t total = 0;
  for (size_t start = 0; start < n;) {
    uint64_t index_bytes = 0, good_size = 0;
    size_t good_end = start;
    for (size_t end = start; end < n && end - start < UINT32_MAX; ++end) {
      index_bytes +=
          Varint64Bytes(end == start ? keys[end] : keys[end] - keys[end - 1]);
      const uint64_t size =
          kSparsePacketHeaderBytes + payload(index_bytes, end + 1 - start);
      if (size > limit) break;
      // int8 packets end only where the values so far fill whole blocks.
      if (!int8 || end + 1 == n || ((end + 1) * dim) % meta.int8_block == 0) {
        good_end = end + 1;
        good_size = size;
      }
    }
    PS_RETURN_IF_ERROR(AddCutPacket(meta, max_packet_bytes, "key", start,
                                    good_end, good_size, &total, packets));
    start = good_end;
  }
  return total;
}

Status EncodeKeyedInto(const SparsePacketMeta& meta,
                       std::span<const uint64_t> keys,
                       std::span<const float> values, size_t max_packet_bytes,
                       size_t headroom, std::vector<uint8_t>* out,
                       std::vector<EncodedPacket>* packets) {
  const size_t n = keys.size();
  PS_RETURN_IF_ERROR(
      CheckEncodeArgs(meta, PacketIndex::kKeys, headroom, n, values.size()));
  for (size_t i = 1; i < n; ++i) {
    if (keys[i] <= keys[i - 1])
      return InvalidArgument("keys are not strictly increasing at position " +
                             Num(i) + ": " + Num(keys[i - 1]) + " then " +
                             Num(keys[i]));
  }
  PS_ASSIGN_OR_RETURN(const size_t total,
                      CutKeyedPackets(meta, keys, max_packet_bytes, packets));
  for (EncodedPacket& pk : *packets) pk.offset += headroom;
  out->resize(headroom + total);
  const uint8_t* const out_end = out->data() + out->size();
  for (const EncodedPacket& pk : *packets) {
    uint8_t* p = out->data() + pk.offset;
    uint8_t* idx = p + kSparsePacketHeaderBytes;
    uint8_t* w = idx;
    uint64_t prev = 0;
    for (uint32_t i = 0; i < pk.row_count; ++i) {
      const uint64_t key = keys[pk.first_row + i];
      w = PutVarint64(i == 0 ? key : key - prev, w, out_end);
      prev = key;
    }
    FinishPacket(meta, pk, static_cast<uint32_t>(w - idx), values, p);
  }
  return Status::OK();
}

// The index section of a parsed keyed packet into keys_out (row_count).
Status DecodeKeys(const SparsePacketHeader& h, const uint8_t* section,
                  uint64_t* keys_out) {
  const uint8_t* p = section;
  const uint8_t* end = section + h.index_bytes;
  uint64_t prev = 0;
  for (uint32_t i = 0; i < h.row_count; ++i) {
    uint64_t delta = 0;
    if (!ReadVarint64(&p, end, &delta))
      return Corruption("malformed or over-long varint at key " + Num(i));
    if (i > 0 && delta == 0)
      return InvalidArgument("keys not strictly increasing at " + Num(i) +
                             ": " + Num(prev) + " twice");
    if (i > 0 && delta > UINT64_MAX - prev)
      return Corruption("key " + Num(i) + " is past 2^64");
    prev = i == 0 ? delta : prev + delta;
    keys_out[i] = prev;
  }
  if (h.meta.index_encoding == IndexEncoding::kKeyHashDeltaVarint) {
    for (uint32_t i = 0; i < h.row_count; ++i) {
      keys_out[i] = KeyFromHash(keys_out[i]);
    }
  }
  if (p != end)
    return Corruption("index section of " + Num(h.index_bytes) +
                      " bytes holds " + Num(h.row_count) + " keys in " +
                      Num(p - section));
  return Status::OK();
}

}  // namespace

Status EncodeKeyedPackets(const SparsePacketMeta& meta,
                          std::span<const uint64_t> keys,
                          std::span<const float> values,
                          size_t max_packet_bytes, std::vector<uint8_t>* out,
                          std::vector<EncodedPacket>* packets,
                          size_t headroom) {
  SparsePacketMeta keyed = meta;
  if (keyed.index_encoding != IndexEncoding::kKeyHashDeltaVarint) {
    keyed.index_encoding = IndexEncoding::kKeyDeltaVarint;
  }
  packets->clear();
  Status s = EncodeKeyedInto(keyed, keys, values, max_packet_bytes, headroom,
                             out, packets);
  if (!s.ok() || packets->empty()) out->clear();
  return s;
}

Status DecodeKeyedPacket(std::span<const uint8_t> packet,
                         const SparsePacketHeader& header,
                         const SparsePacketExpectations& expect,
                         std::span<uint64_t> keys_out,
                         std::span<float> values_out) {
  if (!IsKeyed(header.meta.index_encoding))
    return InvalidArgument("packet of rows given to the keyed decoder");
  PS_RETURN_IF_ERROR(CheckSparsePacketExpectations(header, expect));
  PS_RETURN_IF_ERROR(CheckChecksumAndPadding(packet, header));
  const uint64_t values = uint64_t{header.row_count} * header.meta.row_dim;
  if (keys_out.size() < header.row_count || values_out.size() < values)
    return OutOfRange("packet has " + Num(header.row_count) + " keys x " +
                      Num(header.meta.row_dim) + " values; output buffers " +
                      "hold " + Num(keys_out.size()) + " keys and " +
                      Num(values_out.size()) + " values");
  PS_RETURN_IF_ERROR(DecodeKeys(
      header, packet.data() + kSparsePacketHeaderBytes, keys_out.data()));
  return DecodeValues(packet, header, values_out);
}

}  // namespace ps::protocol
