// Row initializers: a table's starting values. A row's values depend only on
// (the initializer's seed, the row's identity, the column), never on which
// shard holds the row or in which order rows are created, so the same table
// starts the same on 1 or 8 servers and after a restart. The identity is the
// global row for HASHED and DENSE tables and the key for EXACT tables.
//
// Thread-safety: pure functions (the caller owns the rows it passes).
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "protocol/ps.pb.h"

namespace ps::table {

// Checks the spec: name "" / "zeros", "uniform" (values in [-scale, scale])
// or "normal" (mean 0, standard deviation scale); scale finite and >= 0.
Status ValidateInitializer(const proto::InitializerSpec& spec);

// Fills `row` (dim floats) with the initial values of row `identity`.
void InitializeRow(const proto::InitializerSpec& spec, uint64_t identity,
                   std::span<float> row);

// InitializeRow with the spec's choices looked up once, for a table that
// starts rows one at a time (an exact table's new keys). Keeps a reference
// to `spec`, which must outlive it.
class RowInitializer {
 public:
  explicit RowInitializer(const proto::InitializerSpec& spec);
  void Fill(uint64_t identity, std::span<float> row) const;

 private:
  const proto::InitializerSpec& spec_;
  const proto::InitializerKind kind_;
};

// Fills `count` consecutive rows, identities first_identity, +1, ..., stored
// row-major in `rows` (count * dim floats). Zeros cost nothing here: the
// caller's memory is expected to be zero already (fresh allocations are).
void InitializeRows(const proto::InitializerSpec& spec, uint64_t first_identity,
                    uint64_t count, uint32_t dim, float* rows);

}  // namespace ps::table
