// CheckRowBounds: the check every kernel that writes rows of a table makes
// before it writes anything (sparse_accumulate, optimizers): every index
// below the table's row count. Internal to kernels/.
//
// Thread-safe: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace ps::kernels::internal {

// OK when every row < num_rows; else OutOfRange "<who>: index i is row r,
// past the end of a table of n rows" for the first bad one. One vectorized
// max over the rows (AVX2 where the CPU has it); the search for the culprit
// only when the max shows there is one.
Status CheckRowBounds(std::span<const uint32_t> rows, uint64_t num_rows,
                      std::string_view who);

}  // namespace ps::kernels::internal
