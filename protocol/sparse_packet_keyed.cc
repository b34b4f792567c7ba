// Keyed sparse packets (IndexEncoding::kKeyDeltaVarint, and
// kKeyHashDeltaVarint and kKeyHashFixedDeltas over the keys' hashes): the
// encoder and the decoder of an index section of uint64 keys. Header, checksum,
// padding and values are those of every packet (sparse_packet_header.cc,
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

// Bytes each delta of a kKeyHashFixedDeltas section takes when the largest
// is `max_delta`.
uint32_t FixedDeltaWidth(uint64_t max_delta) {
  return std::max(1u,
                  (static_cast<uint32_t>(std::bit_width(max_delta)) + 7) / 8);
}

// A kKeyHashFixedDeltas section: the width byte and the first hash, before
// the deltas.
constexpr uint64_t kFixedDeltasHead = 9;

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
  const bool fixed = meta.index_encoding == IndexEncoding::kKeyHashFixedDeltas;
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
    uint64_t index_bytes = 0, good_size = 0, max_delta = 0;
    size_t good_end = start;
    for (size_t end = start; end < n && end - start < UINT32_MAX; ++end) {
      const uint64_t delta =
          end == start ? keys[end] : keys[end] - keys[end - 1];
      if (fixed) {
        if (end > start) max_delta = std::max(max_delta, delta);
        index_bytes =
            kFixedDeltasHead + (end - start) * FixedDeltaWidth(max_delta);
      } else {
        index_bytes += Varint64Bytes(delta);
      }
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

// Writes the index section of a kKeyHashFixedDeltas packet of `hashes` at
// `w`, in the width of their largest delta (as CutKeyedPackets counted
// it); returns where it ends. A delta with 8 bytes of room goes in one
// store (the bytes past it are overwritten by what follows).
uint8_t* PutFixedDeltas(std::span<const uint64_t> hashes, uint8_t* w,
                        const uint8_t* end) {
  uint64_t max_delta = 0;
  for (size_t i = 1; i < hashes.size(); ++i) {
    max_delta = std::max(max_delta, hashes[i] - hashes[i - 1]);
  }
  const uint32_t width = FixedDeltaWidth(max_delta);
  *w++ = static_cast<uint8_t>(width);
  std::memcpy(w, &hashes[0], 8);
  w += 8;
  for (size_t i = 1; i < hashes.size(); ++i) {
    const uint64_t delta = hashes[i] - hashes[i - 1];
    std::memcpy(w, &delta, end - w >= 8 ? 8 : width);
    w += width;
  }
  return w;
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
  const bool fixed = meta.index_encoding == IndexEncoding::kKeyHashFixedDeltas;
  for (const EncodedPacket& pk : *packets) {
    uint8_t* p = out->data() + pk.offset;
    uint8_t* idx = p + kSparsePacketHeaderBytes;
    uint8_t* w = idx;
    if (fixed) {
      w = PutFixedDeltas(keys.subspan(pk.first_row, pk.row_count), w, out_end);
    } else {
      uint64_t prev = 0;
      for (uint32_t i = 0; i < pk.row_count; ++i) {
        const uint64_t key = keys[pk.first_row + i];
        w = PutVarint64(i == 0 ? key : key - prev, w, out_end);
        prev = key;
      }
    }
    FinishPacket(meta, pk, static_cast<uint32_t>(w - idx), values, p);
  }
  return Status::OK();
}

// The varint index section of a parsed keyed packet into out (row_count).
Status DecodeVarintKeys(const SparsePacketHeader& h, const uint8_t* section,
                        uint64_t* out) {
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
    out[i] = prev;
  }
  if (p != end)
    return Corruption("index section of " + Num(h.index_bytes) +
                      " bytes holds " + Num(h.row_count) + " keys in " +
                      Num(p - section));
  return Status::OK();
}

// A kKeyHashFixedDeltas section into out (row_count hashes). Each delta is
// one load and a mask, its checks folded into one flag, so that no key
// waits for the one before it but through the sum; a packet that fails
// them is read again for the error's position.
Status DecodeFixedDeltas(const SparsePacketHeader& h, const uint8_t* section,
                         uint64_t* out) {
  const uint64_t n = h.row_count;
  const uint32_t width = h.index_bytes >= kFixedDeltasHead ? section[0] : 0;
  if (width < 1 || width > 8)
    return Corruption("index section of " + Num(h.index_bytes) +
                      " bytes has no delta width of 1-8 bytes (" + Num(width) +
                      ")");
  if (h.index_bytes != kFixedDeltasHead + (n - 1) * width)
    return Corruption("index section of " + Num(h.index_bytes) + " bytes for " +
                      Num(n) + " keys of " + Num(width) + "-byte deltas, not " +
                      Num(kFixedDeltasHead + (n - 1) * width));
  const uint8_t* const end = section + h.index_bytes;
  const uint64_t mask =
      width == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1;
  auto delta_at = [&](const uint8_t* d) {
    uint64_t v = 0;
    std::memcpy(&v, d, end - d >= 8 ? 8 : width);
    return v & mask;
  };
  uint64_t prev;
  std::memcpy(&prev, section + 1, 8);
  out[0] = prev;
  bool bad = false;
  const uint8_t* d = section + kFixedDeltasHead;
  for (uint64_t i = 1; i < n; ++i, d += width) {
    const uint64_t delta = delta_at(d);
    const uint64_t next = prev + delta;
    bad |= (delta == 0) | (next < prev);
    prev = next;
    out[i] = prev;
  }
  if (!bad) return Status::OK();
  prev = out[0];
  d = section + kFixedDeltasHead;
  for (uint64_t i = 1; i < n; ++i, d += width) {
    const uint64_t delta = delta_at(d);
    if (delta == 0)
      return InvalidArgument("keys not strictly increasing at " + Num(i) +
                             ": " + Num(prev) + " twice");
    if (delta > UINT64_MAX - prev)
      return Corruption("key " + Num(i) + " is past 2^64");
    prev += delta;
  }
  return Corruption("fixed deltas failed a check no key fails");  // unreachable
}

// The index section of a parsed keyed packet: the keys into keys_out
// (row_count), and of a packet of hashes, the hashes into hashes_out when
// given.
Status DecodeKeys(const SparsePacketHeader& h, const uint8_t* section,
                  uint64_t* keys_out, uint64_t* hashes_out) {
  const IndexEncoding encoding = h.meta.index_encoding;
  uint64_t* decoded =
      IsKeyHashes(encoding) && hashes_out != nullptr ? hashes_out : keys_out;
  PS_RETURN_IF_ERROR(encoding == IndexEncoding::kKeyHashFixedDeltas
                         ? DecodeFixedDeltas(h, section, decoded)
                         : DecodeVarintKeys(h, section, decoded));
  if (IsKeyHashes(encoding)) {
    for (uint32_t i = 0; i < h.row_count; ++i) {
      keys_out[i] = KeyFromHash(decoded[i]);
    }
  }
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
  if (!IsKeyHashes(keyed.index_encoding)) {
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
                         std::span<float> values_out,
                         std::span<uint64_t> hashes_out) {
  if (!IsKeyed(header.meta.index_encoding))
    return InvalidArgument("packet of rows given to the keyed decoder");
  PS_RETURN_IF_ERROR(CheckSparsePacketExpectations(header, expect));
  PS_RETURN_IF_ERROR(CheckChecksumAndPadding(packet, header));
  const uint64_t values = uint64_t{header.row_count} * header.meta.row_dim;
  if (keys_out.size() < header.row_count || values_out.size() < values ||
      (!hashes_out.empty() && hashes_out.size() < header.row_count))
    return OutOfRange("packet has " + Num(header.row_count) + " keys x " +
                      Num(header.meta.row_dim) + " values; output buffers " +
                      "hold " + Num(keys_out.size()) + " keys, " +
                      Num(values_out.size()) + " values and " +
                      Num(hashes_out.size()) + " hashes");
  PS_RETURN_IF_ERROR(DecodeKeys(
      header, packet.data() + kSparsePacketHeaderBytes, keys_out.data(),
      hashes_out.empty() ? nullptr : hashes_out.data()));
  return DecodeValues(packet, header, values_out);
}

}  // namespace ps::protocol
