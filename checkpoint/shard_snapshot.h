// ShardSnapshot: a copy of one shard's tables taken at a cut, what the shard
// writer saves. The server fills it while applying is paused (a memcpy of the
// rows and optimizer state, or of the dirty rows only), then resumes applying
// and writes from the copy in the background: training pauses for the copy,
// not for the disk.
#pragma once

#include <cstdint>
#include <vector>

#include "table/table_snapshot.h"

namespace ps::checkpoint {

// The table's part (table/table_snapshot.h).
using TableSnapshot = table::TableSnapshot;
using UncopiedRows = table::UncopiedRows;

struct ShardSnapshot {
  uint64_t step = 0;
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  std::vector<TableSnapshot> tables;
};

}  // namespace ps::checkpoint
