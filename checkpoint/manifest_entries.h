// Small lookups in a checkpoint's manifest, and how messages name a table:
// shared by the readers of checkpoints (restore, scan, export, serving).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/checkpoint.pb.h"
#include "protocol/ps.pb.h"

namespace ps::checkpoint {

// "table 'emb' (id 1)", for messages.
inline std::string TableWhere(const ps::proto::TableSpec& s) {
  return "table '" + s.name() + "' (id " + std::to_string(s.id()) + ")";
}

// A table's part of a shard's database; nullptr when the shard has none.
inline const proto::ShardTableEntry* FindEntry(const proto::ShardEntry& shard,
                                               uint32_t table_id) {
  for (const auto& t : shard.tables()) {
    if (t.table_id() == table_id) return &t;
  }
  return nullptr;
}

}  // namespace ps::checkpoint
