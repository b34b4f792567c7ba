// What both builds of DevicePush share (device_push.h): construction and
// the argument checks, so a build without CUDA rejects bad arguments with
// the same kInvalidArgument as one with it.
#include "client/device_push.h"

#include <string>

namespace ps::worker {

DevicePush::DevicePush(const proto::TableSpec& spec,
                       const protocol::TableRuntimeConfig& config,
                       const ShardRouter& router, ServerGroup& servers,
                       const WorkerClock& clock)
    : spec_(spec),
      config_(config),
      router_(router),
      servers_(servers),
      clock_(clock) {}

Status DevicePush::CheckRequest(std::span<const float> grad,
                                uint32_t shard) const {
  const std::string what = "push from device to table " + spec_.name();
  if (grad.data() == nullptr) {
    return InvalidArgument(what + ": the gradient pointer is null");
  }
  if (shard != kAllShards && shard >= router_.shards()) {
    return InvalidArgument(what + ": no shard " + std::to_string(shard) +
                           " (of " + std::to_string(router_.shards()) + ")");
  }
  const uint64_t rows =
      shard == kAllShards ? router_.capacity() : router_.RowsOf(shard);
  const uint64_t want = rows * spec_.dim();
  if (grad.size() != want) {
    return InvalidArgument(
        what + ": " + std::to_string(grad.size()) + " values, " +
        (shard == kAllShards ? std::string("the table")
                             : "shard " + std::to_string(shard)) +
        " has " + std::to_string(rows) + " rows of dim " +
        std::to_string(spec_.dim()) + " = " + std::to_string(want));
  }
  return Status::OK();
}

Status DevicePush::Post(std::span<const float> grad, uint32_t shard,
                        std::vector<uint64_t>* sent_rows) {
  if (sent_rows != nullptr) sent_rows->clear();
  PS_RETURN_IF_ERROR(CheckRequest(grad, shard));
  const uint32_t first = shard == kAllShards ? 0 : shard;
  const uint32_t last = shard == kAllShards ? router_.shards() : shard + 1;
  std::lock_guard<std::mutex> lock(mu_);
  return PackAndSend(grad, first, last, sent_rows);
}

}  // namespace ps::worker
