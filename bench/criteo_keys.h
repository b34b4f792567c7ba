// CriteoKeys: the keys of Criteo-shaped examples for skewed benchmarks
// (ps_bench --mode=train --key_law=criteo): the 39 fields of ps_datagen's
// --vocab=criteo layout, 13 integer columns and 26 categorical fields with
// the Criteo Kaggle log's cardinalities and per-field Zipf exponents
// (worker/datagen/vocabulary.h), the categorical cardinalities scaled
// (--vocab_scale's scale) so that all fields together have about as many
// ids as the table holds keys. Key i of an example is field i's.
//
// Ids, as a worker's feature ids are per field: an integer column's value
// is its log bucket (data::LogBucket, as ps_worker keys it), a
// categorical field's its frequency rank, and each field has one id for
// "missing", drawn at the layout's missing share. The ids of all fields
// are numbered 1..ids() and spread over the 64-bit keys by ZipfKeys::KeyOf,
// so a fill pass can push every key.
//
// Not thread-safe (the caller's generator).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "worker/datagen/categorical_fields.h"

namespace ps::bench {

class CriteoKeys {
 public:
  static constexpr int kFields = 39;
  // Integer columns: log buckets 0..kBuckets-1 (values from -3 up, beyond
  // any the layout draws), and "missing".
  static constexpr uint64_t kBuckets = 256;

  // Fields scaled so that they total about `ids` (at least the 13 x 257
  // integer ids and 26 x 3 categorical ones: each field keeps 2 values).
  explicit CriteoKeys(uint64_t ids);

  double vocab_scale() const { return scale_; }
  // Every id: keys are ZipfKeys::KeyOf(1..ids()).
  uint64_t ids() const { return ids_; }

  // The ids of one example, field by field, into out (kFields).
  void Example(std::mt19937_64& rng, std::span<uint64_t> out);

 private:
  double scale_;
  datagen::CategoricalFields categorical_;
  uint64_t first_id_[kFields];  // of each field: its values, then missing
  uint64_t ids_;
  std::normal_distribution<double> normal_{0, 1};
};

}  // namespace ps::bench
