// ShardSnapshot: a copy of one shard's tables taken at a cut, what the shard
// writer saves. The server fills it while applying is paused (a memcpy of the
// rows and optimizer state, or of the dirty rows only), then resumes applying
// and writes from the copy in the background: training pauses for the copy,
// not for the disk.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/optimizers.h"
#include "protocol/ps.pb.h"

namespace ps::checkpoint {

struct TableSnapshot {
  ps::proto::TableSpec spec;
  // true: every row of the table on this shard; false: only what changed
  // since the parent checkpoint.
  bool full = true;
  // HASHED/DENSE: this shard's global rows [first_row, first_row + rows).
  uint64_t first_row = 0;
  uint64_t rows = 0;
  int state_arrays = 0;  // optimizer state floats per parameter (0..2)
  uint64_t optimizer_steps = 0;

  // Entries: ids[i] is a global row (HASHED/DENSE) or a key (EXACT), with
  // values[i * dim, (i + 1) * dim) and the same slice of every state array.
  // A full HASHED/DENSE table may leave ids empty: then the entries are the
  // rows first_row, first_row + 1, ... in order (no id vector to copy).
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<float> state[kernels::kMaxOptimizerStates];
  std::vector<uint64_t> last_update;  // EXACT: per entry
  std::vector<uint64_t> deleted;      // EXACT, not full: keys without a row now

  uint32_t dim() const { return spec.dim(); }
  // Entries with values (not counting deleted keys).
  uint64_t size() const { return values.size() / (dim() ? dim() : 1); }
  uint64_t IdAt(uint64_t i) const {
    return ids.empty() ? first_row + i : ids[i];
  }
};

struct ShardSnapshot {
  uint64_t step = 0;
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  std::vector<TableSnapshot> tables;
};

}  // namespace ps::checkpoint
