// The pull path of HASHED and DENSE tables: rows are read one-sidedly out of
// the servers' memory, no server thread involved.
//
// Cost rule, per call: when the keys are many next to the table
// (keys * 8 >= rows), every shard is read whole with one Get each (posted
// to all shards at once) and each key copies its row from the local copy:
// the read costs at most 8x the bytes returned and needs no sorting.
// Otherwise, per shard, the (row, key) pairs are radix-sorted, duplicates
// read once, adjacent rows (and small holes) coalesced into segments, or
// the whole span read with one segment when the rows fill more than 1/8 of
// it; one ReadV per shard is posted to all shards before waiting for any.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "worker/client_context.h"

namespace ps::worker {

Status PullRows(ClientContext& ctx, TableState& table,
                std::span<const uint64_t> keys, std::span<float> out);
// DENSE tables: the whole table (capacity x dim floats).
Status PullWholeTable(ClientContext& ctx, TableState& table,
                      std::span<float> out);

}  // namespace ps::worker
