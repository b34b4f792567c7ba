// EXACT tables: pushes and pulls go through the server that keeps the key
// index (ExactPush / ExactPull over the control channel), one request per
// shard. Pushes are summed per key first, as for the other kinds.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "worker/client_context.h"

namespace ps::worker {

Status ExactPush(ClientContext& ctx, TableState& table,
                 std::span<const uint64_t> keys, std::span<const float> grads);
Status ExactPull(ClientContext& ctx, TableState& table,
                 std::span<const uint64_t> keys, std::span<float> out);

}  // namespace ps::worker
