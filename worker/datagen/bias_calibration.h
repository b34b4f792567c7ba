// CalibrateBias: the planted bias that gives a layout its click rate.
//
// The share of clicks is not sigmoid(bias): the planted weights (and FM
// interactions) spread the logits, and how much depends on the layout's
// field count and the model flags. So ps_datagen draws sample rows from a
// planted model with bias 0 and solves mean_i sigmoid(b + logit_i) = rate
// for b, which is monotone in b (bisection). It works on the probabilities
// p_i = sigmoid(logit_i) (what RowSynth reports): sigmoid(b + logit_i) =
// p_i e^b / (p_i e^b + 1 - p_i), exact even where a logit is too big to
// recover from p_i.
//
// Thread safety: a pure function.
#pragma once

#include <span>

#include "worker/datagen/row_synth.h"

namespace ps::datagen {

// The bias b in [lo, hi] with mean_i sigmoid(b + logit(p_i)) closest to
// rate (lo or hi when the rate is out of reach). rate in (0, 1); p empty:
// the bias of a model without features, logit(rate), clamped.
double CalibrateBias(std::span<const double> zero_bias_probabilities,
                     double rate, double lo, double hi);

// The same on `rows` rows drawn from *zero_bias_synth, a synth labelled by a
// planted model of bias 0 (and otherwise the one to be calibrated).
double CalibrateBias(RowSynth* zero_bias_synth, int rows, double rate,
                     double lo, double hi);

}  // namespace ps::datagen
