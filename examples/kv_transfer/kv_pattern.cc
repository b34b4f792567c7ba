// The KV cache's deterministic values: fill and check (kv_pattern.h).
#include "examples/kv_transfer/kv_pattern.h"

#include <cstdio>
#include <string>

namespace ps::kv {
namespace {

// splitmix64's finalizer: a row index and seed to 64 well-mixed bits.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct RowPattern {
  uint16_t base;
  uint16_t step;  // odd: the values of a row are all distinct
};

inline RowPattern Row(const KvShape& shape, uint64_t layer, uint64_t kv,
                      uint64_t token, uint64_t head, uint64_t seed) {
  const uint64_t index =
      ((layer * 2 + kv) * shape.tokens + token) * shape.heads + head;
  const uint64_t h = Mix(index ^ Mix(seed));
  return {static_cast<uint16_t>(h), static_cast<uint16_t>((h >> 16) | 1)};
}

std::string Hex4(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%04x", v);
  return buf;
}

}  // namespace

void FillLayer(const KvShape& shape, const HeadRange& heads, uint64_t layer,
               uint64_t seed, uint16_t* layer_data) {
  uint16_t* out = layer_data;
  for (uint64_t kv = 0; kv < 2; ++kv) {
    for (uint64_t t = 0; t < shape.tokens; ++t) {
      for (uint64_t h = heads.begin; h < heads.end; ++h) {
        const RowPattern p = Row(shape, layer, kv, t, h, seed);
        const auto dim = static_cast<uint32_t>(shape.head_dim);
        for (uint32_t d = 0; d < dim; ++d) {
          out[d] = static_cast<uint16_t>(p.base + d * p.step);
        }
        out += shape.head_dim;
      }
    }
  }
}

Status CheckLayer(const KvShape& shape, const HeadRange& heads, uint64_t layer,
                  uint64_t seed, const uint16_t* layer_data) {
  const uint16_t* in = layer_data;
  uint64_t wrong = 0;
  std::string first;
  for (uint64_t kv = 0; kv < 2; ++kv) {
    for (uint64_t t = 0; t < shape.tokens; ++t) {
      for (uint64_t h = heads.begin; h < heads.end; ++h) {
        const RowPattern p = Row(shape, layer, kv, t, h, seed);
        // Branch-free over the row (vectorizes); the place is found only
        // for a row that differs.
        const auto dim = static_cast<uint32_t>(shape.head_dim);
        uint16_t diff = 0;
        for (uint32_t d = 0; d < dim; ++d) {
          diff |= static_cast<uint16_t>(
              in[d] ^ static_cast<uint16_t>(p.base + d * p.step));
        }
        if (diff != 0) [[unlikely]] {
          for (uint32_t d = 0; d < dim; ++d) {
            const auto want = static_cast<uint16_t>(p.base + d * p.step);
            if (in[d] == want) continue;
            if (wrong++ == 0) {
              first = std::string(kv == 0 ? "K" : "V") + " token " +
                      std::to_string(t) + " head " + std::to_string(h) +
                      " dim " + std::to_string(d) + " holds " + Hex4(in[d]) +
                      ", expected " + Hex4(want);
            }
          }
        }
        in += shape.head_dim;
      }
    }
  }
  if (wrong == 0) return Status::OK();
  return Corruption(
      "layer " + std::to_string(layer) + ": " + std::to_string(wrong) + " of " +
      std::to_string(2 * shape.tokens * heads.count() * shape.head_dim) +
      " values differ; the first at " + first);
}

}  // namespace ps::kv
