#include "kernels/sparse_packet.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace ps::kernels {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the packet format is little-endian and read in place");

// Header field offsets (see the layout in sparse_packet.h).
constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffValueType = 5,
                 kOffIndexEncoding = 6, kOffFlags = 7, kOffChecksum = 8,
                 kOffTable = 16, kOffShard = 20, kOffSender = 24,
                 kOffRowDim = 28, kOffStep = 32, kOffRowCount = 40,
                 kOffIndexBytes = 44, kOffPayloadBytes = 48, kOffInt8Block = 52;
constexpr size_t kChecksummedFrom = 16;
// The largest int8 block a packet may declare: keeps per-block work bounded.
constexpr uint32_t kMaxInt8Block = 1u << 20;

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void StoreU64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

constexpr uint64_t Align4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

size_t VarintBytes(uint32_t v) {
  // 1 + floor(bits / 7): 0..127 -> 1, ..., >= 2^28 -> 5.
  int bits = 32 - std::countl_zero(v | 1);
  return static_cast<size_t>((bits + 6) / 7);
}

uint8_t* PutVarint(uint8_t* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

uint64_t ChecksumOf(const uint8_t* packet, size_t size) {
  return XXH3_64bits_withSeed(packet + kChecksummedFrom,
                              size - kChecksummedFrom, LoadU64(packet));
}

uint64_t ScaleCount(const SparsePacketMeta& meta, uint64_t values) {
  return meta.value_type == ValueType::kInt8
             ? Int8BlockCount(values, meta.int8_block)
             : 0;
}

// Bytes after the header for a packet with these index bytes and values.
uint64_t PayloadBytes(const SparsePacketMeta& meta, uint64_t index_bytes,
                      uint64_t values) {
  return Align4(index_bytes) + 4 * ScaleCount(meta, values) +
         Align4(values * ValueTypeBytes(meta.value_type));
}

Status CheckMeta(const SparsePacketMeta& meta) {
  if (meta.row_dim == 0) return InvalidArgument("row_dim must be >= 1");
  if (!IsValidValueType(static_cast<uint8_t>(meta.value_type)))
    return InvalidArgument("unknown value type " +
                           std::to_string(static_cast<int>(meta.value_type)));
  if (meta.index_encoding != IndexEncoding::kDeltaVarint &&
      meta.index_encoding != IndexEncoding::kRawU32)
    return InvalidArgument(
        "unknown index encoding " +
        std::to_string(static_cast<int>(meta.index_encoding)));
  if (meta.value_type == ValueType::kInt8 &&
      (meta.int8_block == 0 || meta.int8_block > kMaxInt8Block))
    return InvalidArgument("int8_block " + std::to_string(meta.int8_block) +
                           " is not in [1, " + std::to_string(kMaxInt8Block) +
                           "]");
  return Status::OK();
}

// Writes value `count` values starting at `values` as `type` at `dst` (4-byte
// aligned within a vector's buffer), int8 scales first.
void WriteValues(const SparsePacketMeta& meta, const float* values,
                 size_t count, uint8_t* dst) {
  switch (meta.value_type) {
    case ValueType::kFp32:
      std::memcpy(dst, values, count * 4);
      break;
    case ValueType::kFp16:
      QuantizeFp16(values, count, reinterpret_cast<uint16_t*>(dst));
      break;
    case ValueType::kBf16:
      QuantizeBf16(values, count, reinterpret_cast<uint16_t*>(dst));
      break;
    case ValueType::kInt8: {
      size_t scales = Int8BlockCount(count, meta.int8_block);
      QuantizeInt8(values, count, meta.int8_block,
                   reinterpret_cast<int8_t*>(dst + 4 * scales),
                   reinterpret_cast<float*>(dst));
      break;
    }
  }
}

std::string Num(uint64_t v) { return std::to_string(v); }

}  // namespace

size_t MaxSparsePacketBytes(const SparsePacketMeta& meta, size_t row_count) {
  uint64_t index_bytes = meta.index_encoding == IndexEncoding::kRawU32
                             ? 4 * uint64_t{row_count}
                             : 5 * uint64_t{row_count};
  return kSparsePacketHeaderBytes +
         PayloadBytes(meta, index_bytes, uint64_t{row_count} * meta.row_dim);
}

Status EncodeSparsePackets(const SparsePacketMeta& meta,
                           std::span<const uint32_t> rows,
                           std::span<const float> values,
                           size_t max_packet_bytes, std::vector<uint8_t>* out,
                           std::vector<EncodedPacket>* packets) {
  out->clear();
  packets->clear();
  PS_RETURN_IF_ERROR(CheckMeta(meta));
  const uint64_t dim = meta.row_dim;
  const size_t n = rows.size();
  if (values.size() != n * dim)
    return InvalidArgument("values has " + Num(values.size()) + " floats, " +
                           Num(n) + " rows of dimension " + Num(dim) +
                           " need " + Num(n * dim));
  if (n == 0) return Status::OK();
  for (size_t i = 1; i < n; ++i) {
    if (rows[i] <= rows[i - 1])
      return InvalidArgument("rows are not strictly increasing at position " +
                             Num(i) + ": " + Num(rows[i - 1]) + " then " +
                             Num(rows[i]));
  }
  const bool varint = meta.index_encoding == IndexEncoding::kDeltaVarint;
  const bool int8 = meta.value_type == ValueType::kInt8;
  const uint64_t limit = std::min<uint64_t>(
      max_packet_bytes, kSparsePacketHeaderBytes + uint64_t{UINT32_MAX} - 3);

  // Pass 1: cut. Greedy: grow a packet row by row while it fits; for int8
  // only cut where the values so far fill whole blocks.
  size_t total = 0;
  for (size_t start = 0; start < n;) {
    uint64_t index_bytes = 0;
    size_t end = start, good_end = start;
    uint64_t good_size = 0;
    while (end < n && end - start < UINT32_MAX) {
      uint32_t delta = end == start ? rows[end] : rows[end] - rows[end - 1];
      uint64_t next_index = index_bytes + (varint ? VarintBytes(delta) : 4);
      uint64_t size = kSparsePacketHeaderBytes +
                      PayloadBytes(meta, next_index, (end + 1 - start) * dim);
      if (size > limit) break;
      index_bytes = next_index;
      ++end;
      if (!int8 || end == n || (end * dim) % meta.int8_block == 0) {
        good_end = end;
        good_size = size;
      }
    }
    if (good_end == start) {
      return InvalidArgument(
          "max_packet_bytes " + Num(max_packet_bytes) +
          " cannot hold one row of dimension " + Num(dim) +
          (int8 ? " (whole int8 blocks of " + Num(meta.int8_block) + ")" : ""));
    }
    packets->push_back(EncodedPacket{total, static_cast<size_t>(good_size),
                                     start,
                                     static_cast<uint32_t>(good_end - start)});
    total += good_size;
    start = good_end;
  }

  // Pass 2: write. Packet sizes are multiples of 4, so every packet, and
  // the value section inside it, stays 4-byte aligned in the buffer.
  out->resize(total);
  for (const EncodedPacket& pk : *packets) {
    uint8_t* p = out->data() + pk.offset;
    uint8_t* idx = p + kSparsePacketHeaderBytes;
    uint8_t* w = idx;
    const uint32_t* r = rows.data() + pk.first_row;
    if (varint) {
      w = PutVarint(w, r[0]);
      for (uint32_t i = 1; i < pk.row_count; ++i)
        w = PutVarint(w, r[i] - r[i - 1]);
    } else {
      std::memcpy(w, r, 4 * size_t{pk.row_count});
      w += 4 * size_t{pk.row_count};
    }
    const uint32_t index_bytes = static_cast<uint32_t>(w - idx);
    uint8_t* vals = idx + Align4(index_bytes);
    std::memset(w, 0, vals - w);
    const size_t count = size_t{pk.row_count} * dim;
    WriteValues(meta, values.data() + pk.first_row * dim, count, vals);
    uint8_t* end = p + pk.size;
    uint8_t* vend = vals + 4 * ScaleCount(meta, count) +
                    count * ValueTypeBytes(meta.value_type);
    std::memset(vend, 0, end - vend);

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
    StoreU32(p + kOffRowCount, pk.row_count);
    StoreU32(p + kOffIndexBytes, index_bytes);
    StoreU32(p + kOffPayloadBytes,
             static_cast<uint32_t>(pk.size - kSparsePacketHeaderBytes));
    StoreU32(p + kOffInt8Block, int8 ? meta.int8_block : 0);
    StoreU64(p + kOffChecksum, ChecksumOf(p, pk.size));
  }
  return Status::OK();
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
  if (!IsValidValueType(p[kOffValueType]))
    return InvalidArgument("unknown value type " + Num(p[kOffValueType]));
  uint8_t enc = p[kOffIndexEncoding];
  if (enc != static_cast<uint8_t>(IndexEncoding::kDeltaVarint) &&
      enc != static_cast<uint8_t>(IndexEncoding::kRawU32))
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
  if (expect.row_dim != 0 && m.row_dim != expect.row_dim)
    return InvalidArgument("row_dim " + Num(m.row_dim) + " but table has " +
                           Num(expect.row_dim));
  if (expect.table_id >= 0 &&
      m.table_id != static_cast<uint64_t>(expect.table_id))
    return InvalidArgument("packet for table " + Num(m.table_id) +
                           " arrived for table " + Num(expect.table_id));
  if (expect.shard_id >= 0 &&
      m.shard_id != static_cast<uint64_t>(expect.shard_id))
    return InvalidArgument("packet for shard " + Num(m.shard_id) +
                           " arrived at shard " + Num(expect.shard_id));
  if (m.value_type == ValueType::kInt8) {
    if (m.int8_block == 0 || m.int8_block > kMaxInt8Block)
      return InvalidArgument("int8_block " + Num(m.int8_block) +
                             " is not in [1, " + Num(kMaxInt8Block) + "]");
  } else if (m.int8_block != 0) {
    return InvalidArgument("int8_block " + Num(m.int8_block) + " set for " +
                           std::string(ValueTypeName(m.value_type)) +
                           " values");
  }
  if (h.row_count == 0) return InvalidArgument("row_count is 0 (empty packet)");
  if (h.row_count > expect.max_row_count)
    return OutOfRange("packet has " + Num(h.row_count) +
                      " rows, more than the " + Num(expect.max_row_count) +
                      " the receiver takes");
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
             h.index_bytes > 5 * uint64_t{h.row_count}) {
    return Corruption("index_bytes " + Num(h.index_bytes) + " cannot hold " +
                      Num(h.row_count) + " varint indices");
  }
  uint64_t want = PayloadBytes(m, h.index_bytes, values);
  if (want != h.payload_bytes)
    return Corruption("payload_bytes " + Num(h.payload_bytes) + " but " +
                      Num(h.row_count) + " rows x " + Num(m.row_dim) + " " +
                      std::string(ValueTypeName(m.value_type)) + " with " +
                      Num(h.index_bytes) + " index bytes take " + Num(want));
  return h;
}

namespace {

// Decodes and validates the index section into `out` (row_count entries)
// or, when `out` is null, only validates it.
template <bool kStore>
Status DecodeIndices(const SparsePacketHeader& h, const uint8_t* section,
                     const SparsePacketExpectations& expect, uint32_t* out) {
  const uint32_t n = h.row_count;
  const uint8_t* p = section;
  const uint8_t* const end = section + h.index_bytes;
  uint64_t row = 0;
  bool zero_delta = false;
  if (h.meta.index_encoding == IndexEncoding::kRawU32) {
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t v = LoadU32(p + 4 * size_t{i});
      zero_delta |= (i > 0) & (v <= prev);
      prev = v;
      if constexpr (kStore) out[i] = v;
    }
    row = prev;
  } else {
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t delta;
      if (end - p >= 5) {  // room for the longest varint: no per-byte checks
        uint32_t b = p[0];
        delta = b & 0x7f;
        if (b < 0x80) {
          p += 1;
        } else {
          b = p[1];
          delta |= (b & 0x7f) << 7;
          if (b < 0x80) {
            p += 2;
          } else {
            b = p[2];
            delta |= (b & 0x7f) << 14;
            if (b < 0x80) {
              p += 3;
            } else {
              b = p[3];
              delta |= (b & 0x7f) << 21;
              if (b < 0x80) {
                p += 4;
              } else {
                b = p[4];
                if (b > 0x0f)
                  return Corruption("varint index " + Num(i) +
                                    " does not fit in 32 bits");
                delta |= b << 28;
                p += 5;
              }
            }
          }
        }
      } else {
        delta = 0;
        int shift = 0;
        for (;;) {
          if (p >= end)
            return Corruption("index section (" + Num(h.index_bytes) +
                              " bytes) ends inside index " + Num(i) + " of " +
                              Num(n));
          uint32_t b = *p++;
          if (shift == 28 && b > 0x0f)
            return Corruption("varint index " + Num(i) +
                              " does not fit in 32 bits");
          delta |= (b & 0x7f) << shift;
          if (b < 0x80) break;
          shift += 7;
        }
      }
      zero_delta |= (i > 0) & (delta == 0);
      row += delta;
      if constexpr (kStore) out[i] = static_cast<uint32_t>(row);
    }
    if (p != end)
      return Corruption("index section has " + Num(end - p) +
                        " bytes left after " + Num(n) + " indices");
  }
  if (zero_delta) {
    // Rare: find where, for the message.
    uint64_t prev = 0, cur = 0;
    const uint8_t* q = section;
    for (uint32_t i = 0; i < n; ++i) {
      if (h.meta.index_encoding == IndexEncoding::kRawU32) {
        cur = LoadU32(q + 4 * size_t{i});
      } else {
        uint32_t d = 0;
        int shift = 0;
        for (;;) {
          uint32_t b = *q++;
          d |= (b & 0x7f) << shift;
          if (b < 0x80) break;
          shift += 7;
        }
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
  if (row > UINT32_MAX || row >= expect.table_rows)
    return OutOfRange("row index " + Num(row) + " is outside the table's " +
                      Num(expect.table_rows) + " rows");
  return Status::OK();
}

// Dequantizes values [first, first + count) of the packet into `out`.
// `vals` points at the scales (int8) or values; it may be unaligned.
void DequantizeRange(const SparsePacketHeader& h, const uint8_t* vals,
                     uint64_t total_values, uint64_t first, size_t count,
                     float* out) {
  const ValueType type = h.meta.value_type;
  if (type == ValueType::kInt8) {
    const uint64_t block = h.meta.int8_block;
    const uint8_t* q = vals + 4 * Int8BlockCount(total_values, block);
    size_t done = 0;
    while (done < count) {
      uint64_t v = first + done;
      uint64_t b = v / block;
      size_t len = static_cast<size_t>(
          std::min<uint64_t>(count - done, (b + 1) * block - v));
      float scale;
      std::memcpy(&scale, vals + 4 * b, 4);
      DequantizeInt8(reinterpret_cast<const int8_t*>(q + v), len, len, &scale,
                     out + done);
      done += len;
    }
    return;
  }
  const size_t width = ValueTypeBytes(type);
  const uint8_t* src = vals + first * width;
  if (type == ValueType::kFp32) {
    std::memcpy(out, src, count * 4);
    return;
  }
  auto convert = [&](const uint16_t* in, size_t n, float* dst) {
    if (type == ValueType::kFp16)
      DequantizeFp16(in, n, dst);
    else
      DequantizeBf16(in, n, dst);
  };
  if (reinterpret_cast<uintptr_t>(src) % alignof(uint16_t) == 0) {
    convert(reinterpret_cast<const uint16_t*>(src), count, out);
    return;
  }
  uint16_t tmp[1024];  // unaligned packet: convert from an aligned copy
  for (size_t done = 0; done < count;) {
    size_t len = std::min<size_t>(1024, count - done);
    std::memcpy(tmp, src + 2 * done, 2 * len);
    convert(tmp, len, out + done);
    done += len;
  }
}

// True when every float is finite (one pass the compiler vectorizes).
bool AllFinite(const float* v, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    bad |= static_cast<uint32_t>((bits & 0x7f800000) == 0x7f800000);
  }
  return bad == 0;
}

Status CheckScales(const SparsePacketHeader& h, const uint8_t* vals,
                   uint64_t total_values) {
  if (h.meta.value_type != ValueType::kInt8) return Status::OK();
  uint64_t blocks = Int8BlockCount(total_values, h.meta.int8_block);
  for (uint64_t b = 0; b < blocks; ++b) {
    float s;
    std::memcpy(&s, vals + 4 * b, 4);
    if (!(s >= 0.0f) || !std::isfinite(s))
      return Corruption("int8 scale " + Num(b) + " is " + std::to_string(s) +
                        " (must be finite and >= 0)");
  }
  const int8_t* q = reinterpret_cast<const int8_t*>(vals + 4 * blocks);
  uint32_t bad = 0;
  for (uint64_t i = 0; i < total_values; ++i) bad |= (q[i] == -128);
  if (bad) return Corruption("int8 value -128 (the encoder uses [-127, 127])");
  return Status::OK();
}

// Everything up to (not including) the index and value sections' content.
StatusOr<SparsePacketHeader> CheckPacket(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect) {
  PS_ASSIGN_OR_RETURN(SparsePacketHeader h,
                      ParseSparsePacketHeader(packet, expect));
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
                        values * ValueTypeBytes(h.meta.value_type);
  for (uint64_t i = used; i < h.payload_bytes; ++i)
    if (idx[i] != 0) return Corruption("nonzero padding after the values");
  return h;
}

}  // namespace

Status DecodeSparsePacket(std::span<const uint8_t> packet,
                          const SparsePacketExpectations& expect,
                          std::span<uint32_t> rows_out,
                          std::span<float> values_out,
                          SparsePacketHeader* header_out) {
  PS_ASSIGN_OR_RETURN(SparsePacketHeader h, CheckPacket(packet, expect));
  const uint64_t values = uint64_t{h.row_count} * h.meta.row_dim;
  if (rows_out.size() < h.row_count || values_out.size() < values)
    return OutOfRange("packet has " + Num(h.row_count) + " rows x " +
                      Num(h.meta.row_dim) + " values; output buffers hold " +
                      Num(rows_out.size()) + " rows and " +
                      Num(values_out.size()) + " values");
  const uint8_t* idx = packet.data() + kSparsePacketHeaderBytes;
  PS_RETURN_IF_ERROR(DecodeIndices<true>(h, idx, expect, rows_out.data()));
  const uint8_t* vals = idx + Align4(h.index_bytes);
  PS_RETURN_IF_ERROR(CheckScales(h, vals, values));
  DequantizeRange(h, vals, values, 0, values, values_out.data());
  if (!AllFinite(values_out.data(), values))
    return Corruption("packet carries a non-finite value");
  if (header_out != nullptr) *header_out = h;
  return Status::OK();
}

Status DecodeSparsePacketRows(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect,
    const std::function<void(uint32_t row, const float* values)>& fn,
    SparsePacketHeader* header_out) {
  PS_ASSIGN_OR_RETURN(SparsePacketHeader h, CheckPacket(packet, expect));
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
    if (!AllFinite(buf, count))
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
        uint32_t d = 0;
        int shift = 0;
        for (;;) {
          uint32_t b = *p++;
          d |= (b & 0x7f) << shift;
          if (b < 0x80) break;
          shift += 7;
        }
        row = (r + k == 0) ? d : row + d;
      }
      fn(static_cast<uint32_t>(row), buf + k * dim);
    }
  }
  if (header_out != nullptr) *header_out = h;
  return Status::OK();
}

}  // namespace ps::kernels
