// AddToSortedSums: one step of summing a push's gradients, taken in id
// order, into one entry per distinct id: what a push does before it packs
// them (rows of HASHED and DENSE tables, keys of EXACT ones). Header-only:
// it runs once per key in the push loops.
//
// Thread safety: a function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "base/append_row.h"

namespace ps::worker {

// Adds gradient `g` (dim floats) of `id` to (ids, sums), which hold one
// entry per distinct id seen so far, ids ascending: to the last entry when
// `id` is its id, else as a new entry.
template <class Id>
inline void AddToSortedSums(Id id, const float* g, uint32_t dim,
                            std::vector<Id>* ids, std::vector<float>* sums) {
  if (ids->empty() || ids->back() != id) {
    ids->push_back(id);
    AppendRow(g, dim, sums);
    return;
  }
  float* sum = sums->data() + sums->size() - dim;
  for (uint32_t j = 0; j < dim; ++j) sum[j] += g[j];
}

}  // namespace ps::worker
