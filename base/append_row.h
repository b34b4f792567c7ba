// AppendRow: appends one row of `dim` floats to the end of a vector, as the
// push paths gather rows a key at a time (a worker's sums, a server's
// gradients to apply).
//
// Thread safety: a function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

namespace ps {

// Rows of up to kFloatByFloat floats are pushed back float by float: a
// range insert calls memmove, which cost more than the copy of a float or
// two (a sixth of a dim-1 push's worker time). Wider rows go in one range
// insert: float by float, each push_back checks the capacity and stores the
// size again. Rows gathered at random, 10M keys, one thread: dim 2 21-24
// ns a key float by float against 27 ranged, dim 3 about even, dim 4 33
// against 27, dim 16 66 against 39.
inline constexpr uint32_t kFloatByFloat = 3;

inline void AppendRow(const float* row, uint32_t dim, std::vector<float>* to) {
  if (dim <= kFloatByFloat) {
    for (uint32_t j = 0; j < dim; ++j) to->push_back(row[j]);
  } else {
    to->insert(to->end(), row, row + dim);
  }
}

}  // namespace ps
