// The layouts ps_datagen writes (--layout), all labelled by the same planted
// model machinery (planted_model.h, categorical_fields.h):
//
//   kCriteo  Criteo TSV: label, 13 integer columns, 26 categorical 8-hex
//            tokens (CriteoSynth; its fields follow --vocab).
//   kOnehot  a one-hot libsvm/libFM log shaped like a public app-usage log
//            (Frappe): "label idx:1 ..." with one feature in each of 10
//            fields, about 5,400 features in all (OnehotSynth).
//   kAvazu   a CSV with a header, the 24 columns of the Avazu CTR log
//            (AvazuSynth).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string_view>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::datagen {

enum class Layout { kCriteo, kOnehot, kAvazu };

// "criteo", "onehot" or "avazu"; kInvalidArgument for anything else.
StatusOr<Layout> ParseLayout(std::string_view name);

}  // namespace ps::datagen
