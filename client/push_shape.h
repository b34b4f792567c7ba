// CheckPushShape: the check every push path makes before it touches a
// gradient: `values` floats must be `keys` rows of the table's dim.
//
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"
#include "protocol/ps.pb.h"

namespace ps::worker {

// kInvalidArgument "push to table T: V values for K keys of dim D".
inline Status CheckPushShape(const proto::TableSpec& spec, size_t keys,
                             size_t values) {
  if (values == keys * spec.dim()) return Status::OK();
  return InvalidArgument("push to table " + spec.name() + ": " +
                         std::to_string(values) + " values for " +
                         std::to_string(keys) + " keys of dim " +
                         std::to_string(spec.dim()));
}

}  // namespace ps::worker
