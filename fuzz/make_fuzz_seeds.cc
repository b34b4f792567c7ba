// Writes a few valid packets (one per value type and index encoding, keyed
// ones too, and a lookup packet) as seed inputs for fuzz_sparse_packet, each
// with the 8-byte expectations prefix.
#include <cstdio>
#include <string>
#include <vector>

#include "protocol/lookup_packet.h"
#include "protocol/sparse_packet.h"

namespace {

// Writes DIR/seed<n>: the 8-byte expectations prefix, then the packet.
bool WriteSeed(const char* dir, int n, std::vector<uint8_t> input,
               const std::vector<uint8_t>& packet) {
  input.insert(input.end(), packet.begin(), packet.end());
  const std::string path = std::string(dir) + "/seed" + std::to_string(n);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  std::fwrite(input.data(), 1, input.size(), f);
  return std::fclose(f) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ps::protocol;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  int n = 0;
  for (uint8_t type = 0; type < 4; ++type) {
    for (IndexEncoding enc :
         {IndexEncoding::kDeltaVarint, IndexEncoding::kRawU32,
          IndexEncoding::kKeyDeltaVarint, IndexEncoding::kKeyHashDeltaVarint,
          IndexEncoding::kKeyHashFixedDeltas}) {
      SparsePacketMeta meta{.row_dim = 2,
                            .value_type = static_cast<ValueType>(type),
                            .index_encoding = enc,
                            .int8_block = 4};
      std::vector<uint32_t> rows = {1, 7, 300, 20000};
      std::vector<float> vals = {0.5f, -1, 2, 3, -0.25f, 8, 1e-3f, 7};
      std::vector<uint8_t> out;
      std::vector<EncodedPacket> packets;
      const std::vector<uint64_t> keys = {3, 1u << 20, 1ull << 40, ~0ull};
      const ps::Status encoded =
          IsKeyed(enc)
              ? EncodeKeyedPackets(meta, keys, vals, 4096, &out, &packets)
              : EncodeSparsePackets(meta, rows, vals, 4096, &out, &packets);
      if (!encoded.ok()) return 1;
      // table_rows = 1 + 0xffff * 1, row_dim 2, not resealed.
      if (!WriteSeed(argv[1], n++, {0xff, 0xff, 0, 0, 2, 0, 0, 0}, out)) {
        return 1;
      }
    }
  }
  // A lookup for shard 2 (the prefix's byte 6 picks the shard, mod 4).
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  const std::vector<uint64_t> keys = {9, 3, ~0ull};
  if (!EncodeLookupPackets(LookupMeta{.table_id = 1, .shard_id = 2}, keys, 1,
                           256, 8, 4096, 0, &out, &packets)
           .ok()) {
    return 1;
  }
  return WriteSeed(argv[1], n, {0xff, 0xff, 0, 0, 2, 0, 2, 0}, out) ? 0 : 1;
}
