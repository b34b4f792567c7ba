// CategoricalFields: the frequency ranks of K categorical fields, each with
// its own vocabulary (FieldVocabulary: a value count and a Zipf exponent),
// and the 8-hex-digit tokens that stand for them in a written log. Every
// layout of ps_datagen draws its categorical values here (CriteoSynth its 26
// fields, OnehotSynth and AvazuSynth theirs), so the layouts differ in what
// they write, not in how they sample.
//
// Two ways to sample, because the Criteo layout's --vocab=small rows must
// stay byte for byte what they were (the fast tests and the demo were tuned
// on them): kTable inverts a CDF table (one double a value, so small
// vocabularies only), kRejection uses ZipfSampler (O(1) memory a field, any
// size). Both draw from the caller's engine, so the caller's stream decides
// the rows.
//
// Thread safety: immutable after construction; SampleRank is const.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "worker/datagen/vocabulary.h"
#include "worker/datagen/zipf_sampler.h"

namespace ps::datagen {

class CategoricalFields {
 public:
  enum class Sampling { kTable, kRejection };

  // The vocabularies are the program's own (vocabulary.h and the layouts'
  // tables), not user input: an invalid one (0 values, a negative exponent)
  // is a bug and fails loudly.
  CategoricalFields(std::vector<FieldVocabulary> fields, Sampling sampling);

  int size() const { return static_cast<int>(fields_.size()); }
  const FieldVocabulary& vocabulary(int field) const { return fields_[field]; }

  // A frequency rank of `field` (0: its most frequent value).
  uint64_t SampleRank(int field, std::mt19937_64& rng) const;

 private:
  std::vector<FieldVocabulary> fields_;
  std::vector<std::vector<double>> cdf_;  // kTable
  std::vector<ZipfSampler> samplers_;     // kRejection
};

// The 32-bit token of value `rank` of field `field`, a hash salted per data
// set (`salt`), so that tokens look like a hashed log's (Criteo's and
// Avazu's are 8 hex digits) and carry no rank order a learner could exploit.
uint32_t HashedToken(uint64_t salt, uint64_t field, uint64_t rank);

}  // namespace ps::datagen
