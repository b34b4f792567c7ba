// The names a TableSpec gives its optimizer and initializer, read in one
// place each: everything else in table/ (and the server's and the local
// store's use of it) works on what these return, so that switching the spec
// to typed enums touches these two functions only.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "base/status_or.h"
#include "protocol/ps.pb.h"

namespace ps::table {

enum class InitializerKind {
  kZeros,    // "" or "zeros"
  kUniform,  // "uniform": values in [-scale, scale]
  kNormal,   // "normal": mean 0, standard deviation scale
};

// The initializer `name` stands for; kInvalidArgument for an unknown one.
StatusOr<InitializerKind> InitializerKindOf(const std::string& name);

// The optimizer's name as logs and descriptions show it ("" is "sum"), and
// whether it is plain summation (rows += g: no learning rate applies).
struct OptimizerName {
  std::string shown;
  bool sum = false;
};
OptimizerName OptimizerNameOf(const proto::OptimizerSpec& spec);

}  // namespace ps::table
