// libFuzzer target: the sparse packet decoders (rows and keyed) and the
// lookup packet parser (protocol/lookup_packet.h) must reject
// or accept any input without reading or writing outside their buffers, and
// whatever they accept must keep its promises (rows increasing and in
// range, keys (or, sent as hashes, their hashes) increasing, values finite; a
// keyed packet is never taken for rows or the other way round). The first 8
// input bytes choose the expectations; the rest is the packet, also resealed
// (checksum recomputed) half of the time so mutations reach the checks behind
// the checksum.
#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "protocol/key_hash.h"
#include "protocol/lookup_packet.h"
#include "protocol/sparse_packet.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

void DecodeOne(const std::vector<uint8_t>& packet, uint64_t table_rows,
               uint32_t row_dim) {
  using namespace ps::protocol;
  SparsePacketExpectations ex{
      .table_rows = table_rows, .row_dim = row_dim, .max_row_count = 1024};
  std::vector<uint32_t> rows(1024);
  std::vector<float> vals(1024 * 16);
  SparsePacketHeader h;
  ps::Status s = DecodeSparsePacket(packet, ex, rows, vals, &h);
  size_t reported = 0;
  ps::Status s2 = DecodeSparsePacketRows(
      packet, ex, [&](uint32_t, const float* v) { reported += v != nullptr; },
      nullptr);
  Check(s.code() == s2.code());
  if (!s.ok()) {
    Check(reported == 0 && !s.message().empty());
    return;
  }
  Check(reported == h.row_count && packet.size() == h.packet_bytes());
  for (uint32_t i = 0; i < h.row_count; ++i) {
    Check(rows[i] < table_rows);
    if (i > 0) Check(rows[i] > rows[i - 1]);
  }
  for (uint64_t i = 0; i < uint64_t{h.row_count} * h.meta.row_dim; ++i)
    Check(std::isfinite(vals[i]));
}

// The keyed decoder: what the header parser admits as keyed, decoded.
void DecodeKeyed(const std::vector<uint8_t>& packet, uint32_t row_dim) {
  using namespace ps::protocol;
  SparsePacketExpectations ex{
      .row_dim = row_dim, .max_row_count = 1024, .index = PacketIndex::kKeys};
  auto h = ParseSparsePacketHeader(packet, ex);
  if (!h.ok()) return;
  Check(IsKeyed(h->meta.index_encoding));
  std::vector<uint64_t> keys(1024), hashes_out(1024);
  std::vector<float> vals(1024 * 16);
  ps::Status s = DecodeKeyedPacket(packet, *h, ex, keys, vals, hashes_out);
  if (!s.ok()) {
    Check(!s.message().empty());
    return;
  }
  // Strictly increasing keys, or key hashes for keys sent as hashes, which
  // come out with the keys.
  const bool hashes = IsKeyHashes(h->meta.index_encoding);
  auto order = [&](uint64_t key) { return hashes ? KeyHash(key) : key; };
  for (uint32_t i = 1; i < h->row_count; ++i)
    Check(order(keys[i]) > order(keys[i - 1]));
  for (uint32_t i = 0; hashes && i < h->row_count; ++i)
    Check(hashes_out[i] == KeyHash(keys[i]));
  for (uint64_t i = 0; i < uint64_t{h->row_count} * h->meta.row_dim; ++i)
    Check(std::isfinite(vals[i]));
}

// The lookup parser: what it admits holds as many keys as its length says,
// at least one, and a reply offset the server may write at.
void ParseLookup(const std::vector<uint8_t>& packet, uint32_t shard) {
  using namespace ps::protocol;
  auto r = ParseLookupPacket(packet, shard);
  if (!r.ok()) {
    Check(!r.status().message().empty());
    return;
  }
  Check(IsLookupPacket(packet) && !r->keys.empty() &&
        packet.size() == kLookupPacketHeaderBytes + 8 * r->keys.size());
  Check(r->request != 0 && r->reply_offset >= kLookupReplyHeaderBytes &&
        r->reply_offset % kLookupReplyOffsetAlign == 0);
  Check(r->meta.shard_id == shard &&
        UncheckedLookupRequest(packet) == r->request);
  uint64_t sum = 0;
  for (uint64_t k : r->keys) sum += k;  // every key inside the packet
  (void)sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t table_rows = 1 + (uint64_t{data[0]} | uint64_t{data[1]} << 8 |
                             uint64_t{data[2]} << 16) *
                                (data[3] + 1);
  uint32_t row_dim = data[4] % 17;  // 0: any dimension (up to the buffer)
  bool reseal = data[5] & 1;
  std::vector<uint8_t> packet(data + 8, data + size);  // exact size
  if (reseal && packet.size() >= 16) {
    uint64_t seed;
    std::memcpy(&seed, packet.data(), 8);
    uint64_t sum =
        XXH3_64bits_withSeed(packet.data() + 16, packet.size() - 16, seed);
    std::memcpy(packet.data() + 8, &sum, 8);
  }
  DecodeOne(packet, table_rows, row_dim);
  DecodeKeyed(packet, row_dim);
  ParseLookup(packet, data[6] % 4);
  return 0;
}
