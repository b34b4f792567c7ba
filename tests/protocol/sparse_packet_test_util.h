// Helpers shared by the sparse packet tests: random pushes, what the
// receiver should see, and mutations that keep a packet's checksum valid.
#pragma once

#include <xxhash.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "kernels/quantize.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol::testing {

inline constexpr ValueType kTypes[] = {ValueType::kFp32, ValueType::kFp16,
                                       ValueType::kBf16, ValueType::kInt8};

struct Push {
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

inline Push RandomPush(size_t n, uint32_t dim, uint64_t table_rows,
                       std::mt19937& rng) {
  std::set<uint32_t> picked;
  std::uniform_int_distribution<uint64_t> row(0, table_rows - 1);
  while (picked.size() < n) picked.insert(static_cast<uint32_t>(row(rng)));
  Push p;
  p.rows.assign(picked.begin(), picked.end());
  std::normal_distribution<float> val(0.0f, 0.01f);
  p.values.resize(n * dim);
  for (auto& v : p.values) v = val(rng);
  return p;
}

// Re-seals a packet after a mutation so decoding reaches the deeper checks.
inline void Reseal(std::vector<uint8_t>& pk) {
  if (pk.size() < kSparsePacketHeaderBytes) return;
  uint64_t seed;
  std::memcpy(&seed, pk.data(), 8);
  uint64_t sum = XXH3_64bits_withSeed(pk.data() + 16, pk.size() - 16, seed);
  std::memcpy(pk.data() + 8, &sum, 8);
}

inline void SetU32(std::vector<uint8_t>& pk, size_t off, uint32_t v) {
  if (off + 4 <= pk.size()) std::memcpy(pk.data() + off, &v, 4);
}

// The value the receiver should see for push value i (quantized per packet).
inline std::vector<float> Expected(const SparsePacketMeta& meta,
                                   const Push& push,
                                   const std::vector<EncodedPacket>& packets) {
  std::vector<float> want(push.values.size());
  for (const EncodedPacket& pk : packets) {
    size_t first = pk.first_row * meta.row_dim;
    kernels::RoundTrip(meta.value_type, push.values.data() + first,
                       size_t{pk.row_count} * meta.row_dim, meta.int8_block,
                       want.data() + first);
  }
  return want;
}

}  // namespace ps::protocol::testing
