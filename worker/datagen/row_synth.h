// RowSynth: what ps_datagen writes, one labelled line at a time, whatever
// the layout (layout.h): Criteo TSV, a one-hot libsvm log, an Avazu CSV.
// Each line is labelled by a PlantedModel, and its planted click probability
// comes with it, so that the program can report the planted optimum.
//
// SynthOptions are the options every layout reads (each reads the ones that
// apply to it; see the fields).
//
// Thread safety: none; one RowSynth per thread.
#pragma once

#include <cstdint>
#include <string>

#include "worker/datagen/vocabulary.h"

namespace ps::datagen {

struct SynthOptions {
  uint64_t seed = 1;
  // Criteo layout, kSmall: the largest categorical vocabulary (field c gets
  // about max_vocab / 3^(c % 7)) and the fields' Zipf exponent.
  uint32_t max_vocab = 100;
  double zipf_exponent = 1.1;
  // Planted FM factors of the category of frequency rank r (0: the most
  // frequent of its field) are scaled by min(1, (factor_rank / (r + 1))^2):
  // full strength for the factor_rank most frequent values, then quickly
  // fading (see planted_model.h for why). 0: no scaling.
  double factor_rank = 0;
  // Last, so that SynthOptions{seed, max_vocab, zipf_exponent, factor_rank}
  // keeps its meaning.
  VocabShape vocab = VocabShape::kSmall;
  // Criteo layout with kCriteo, and the onehot and Avazu layouts: each
  // field's value count is scaled by this (at least 2 values a field); the
  // per-field exponents stay.
  double vocab_scale = 1;
};

class RowSynth {
 public:
  virtual ~RowSynth() = default;

  // The line before the rows (a CSV header), without newline; empty: none.
  virtual std::string Header() const { return {}; }

  // Writes one labelled line (no newline) into *line, sets *probability to
  // the planted click probability of the row; returns its label, 0 or 1.
  virtual int NextRow(std::string* line, double* probability) = 0;
};

}  // namespace ps::datagen
