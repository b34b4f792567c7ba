// KeyHash: the hash an EXACT table's server files a key under, and the
// order a worker sends the keys of a push in.
//
// The table picks a key's partition by the hash's top bits and its slot in
// that partition's index by the bits below (table/key_index.h), so keys that
// arrive in hash order walk the index from one end to the other instead of
// jumping about it: a push of millions of keys reads the index as a stream.
// Workers sort a push's keys by this hash and send the hashes
// (IndexEncoding::kKeyHashFixedDeltas); since the hash is a bijection, the
// server recovers each key from its hash (KeyFromHash).
//
// It is MurmurHash3's 64-bit finalizer (fmix64): every key bit moves every
// bit of the hash. Not Mix64 (protocol/shard_map.h) on purpose: that one
// picks a key's shard, so all keys of one shard share its value modulo the
// shard count, and slots chosen by it would crowd.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

namespace ps::protocol {

namespace internal {
// The inverse of an odd number modulo 2^64 (Newton's iteration: each step
// doubles the bits that are right, from 3 for x = a).
constexpr uint64_t InverseMod64(uint64_t a) {
  uint64_t x = a;
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}
inline constexpr uint64_t kKeyHashMul1 = 0xff51afd7ed558ccdull;
inline constexpr uint64_t kKeyHashMul2 = 0xc4ceb9fe1a85ec53ull;
inline constexpr uint64_t kKeyHashInv1 = InverseMod64(kKeyHashMul1);
inline constexpr uint64_t kKeyHashInv2 = InverseMod64(kKeyHashMul2);
static_assert(kKeyHashMul1 * kKeyHashInv1 == 1);
static_assert(kKeyHashMul2 * kKeyHashInv2 == 1);

// fmix64's shape: xor-shift, multiply, xor-shift, multiply, xor-shift.
// KeyHash and its inverse are both this with other multipliers.
inline uint64_t ShiftMultiplyShift(uint64_t x, uint64_t a, uint64_t b) {
  x ^= x >> 33;
  x *= a;
  x ^= x >> 33;
  x *= b;
  x ^= x >> 33;
  return x;
}
}  // namespace internal

inline uint64_t KeyHash(uint64_t k) {
  return internal::ShiftMultiplyShift(k, internal::kKeyHashMul1,
                                      internal::kKeyHashMul2);
}

// The key whose KeyHash is `h`: the same steps backwards, each multiplier's
// inverse in turn (x ^= x >> 33 undoes itself: 33 >= 64 / 2).
inline uint64_t KeyFromHash(uint64_t h) {
  return internal::ShiftMultiplyShift(h, internal::kKeyHashInv2,
                                      internal::kKeyHashInv1);
}

}  // namespace ps::protocol
