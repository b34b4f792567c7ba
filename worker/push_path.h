// The push path of HASHED and DENSE tables: keys -> (shard, local row),
// duplicates summed per row, rows sorted per shard, optional sparsification
// with error feedback, encoding into slot-sized sparse packets and writing
// them into the worker's inbox on each server.
//
// Two ways to sum duplicates, chosen per call by a cost rule:
//  - dense: when the keys are many next to the table (keys * 8 >= rows) or
//    the table sparsifies, each shard's DenseAccumulator takes one random
//    add per key and its bitmap yields the sorted rows; packets are encoded
//    and written chunk by chunk so the server applies while we encode.
//  - sorted: otherwise, (row, key index) pairs per shard are radix-sorted
//    and summed in key order.
// Both sum a row's duplicates in key order, so they give the same bits.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "worker/client_context.h"

namespace ps::worker {

Status PushRows(ClientContext& ctx, TableState& table,
                std::span<const uint64_t> keys, std::span<const float> grads);
// DENSE tables: grads holds the whole table (capacity x dim).
Status PushWholeTable(ClientContext& ctx, TableState& table,
                      std::span<const float> grads);
// Sends the residual of a sparsifying table in fp32 and zeroes it.
Status FlushTableResiduals(ClientContext& ctx, TableState& table);

}  // namespace ps::worker
