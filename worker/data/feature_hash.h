// Feature ids: every (field, token) pair becomes a 64-bit id by hashing, so
// models need no vocabulary and the reader, the data generator and the
// trainer agree without sharing state. Counts are log-bucketed first so that
// 1, 2, 3 stay apart while 1000 and 1100 share an id.
#pragma once

#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <string_view>

namespace ps::data {

// The id of `token` in field `field` (fields are numbered from 0).
inline uint64_t HashFeature(uint32_t field, std::string_view token) {
  return XXH3_64bits_withSeed(token.data(), token.size(),
                              0x9e3779b97f4a7c15ULL * (field + 1));
}

// The id of an integer-valued feature after bucketing.
inline uint64_t HashBucket(uint32_t field, int64_t bucket) {
  return XXH3_64bits_withSeed(&bucket, sizeof(bucket),
                              0x51ed270b27c6f5a3ULL * (field + 1));
}

// The id that stands for "this field is missing".
inline uint64_t MissingFeature(uint32_t field) {
  return HashFeature(field, std::string_view("\x01missing", 8));
}

// The id that stands for "a value of this field too rare to have its own
// row yet" (frequency admission, worker/train/feature_admission.h): every
// such value of the field shares it.
inline uint64_t OovFeature(uint32_t field) {
  return HashFeature(field, std::string_view("\x02oov", 4));
}

// Log-bucketing of a count: small values keep their own bucket, larger ones
// share floor(ln(v)^2) (the transform that won the Criteo contest); negative
// values keep their own small buckets.
inline int64_t LogBucket(int64_t v) {
  if (v <= 2) return v;
  double l = std::log(static_cast<double>(v));
  return 3 + static_cast<int64_t>(l * l);
}

}  // namespace ps::data
