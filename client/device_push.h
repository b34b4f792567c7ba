// DevicePush: the push path of one HASHED or DENSE table for a gradient that
// lives in GPU memory (PsClient::PushFromDevice). Per shard, the device
// packer (protocol/cuda/device_packer.h) selects the rows, quantizes them to
// the table's push value type and writes the packet bytes on the device;
// the finished packets are copied to the host once and written to that
// shard's inbox through the same InboxWriter as host-built packets, stamped
// with the same table, shard, sender and step, so the server cannot tell
// them apart and BSP / SSP / async behave as for Push.
//
// The gradient is dense and indexed by global row (protocol::ShardMap), not
// by key: that is the form a gradient has on the device (an embedding
// table's backward pass writes rows, it never sees keys). Either every row
// of the table (capacity x dim floats) or one shard's rows only.
//
// Which rows are sent (the table's sparsify settings; no error feedback:
// the caller keeps its dense gradient, and `sent_rows` says what left):
//   - SPARSIFY_NONE: every row with a nonzero value (max |v| > 0; a row of
//     zeros adds nothing, and a hashed table's gradient is mostly zeros).
//     A row whose values are all NaN is not sent.
//   - SPARSIFY_THRESHOLD: rows with L2 norm (|v| for dim 1) >= epsilon.
//   - SPARSIFY_TOPK: the ceil(topk_fraction * rows) rows of largest L2 norm
//     per shard, rows counting the shard's rows in the gradient (the host
//     path counts the rows a push touched, which a device gradient does not
//     know).
// Quantization errors are not sampled into ClientCounters.
//
// Two builds, one header: device_push_cuda.cc where ps_kernels_cuda exists
// (nvcc found, no sanitizer), device_push_none.cc elsewhere, whose Post
// returns kNotSupported after the argument checks every build makes.
//
// Thread-safe: one device push of the table at a time (a mutex: the
// packer's device scratch is per table); host pushes of the same table run
// beside it (InboxWriter interleaves whole packets).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "base/status.h"
#include "client/server_group.h"
#include "client/shard_router.h"
#include "client/worker_clock.h"
#include "protocol/ps.pb.h"
#include "protocol/table_runtime_config.h"

namespace ps::worker {

// OK when this build and machine can push from device memory; otherwise
// kNotSupported saying why (no CUDA in the build, no usable device).
Status DevicePushAvailable();

class DevicePush {
 public:
  // `shard` of Post meaning every shard (the whole table).
  static constexpr uint32_t kAllShards = UINT32_MAX;

  // Everything passed must outlive the object.
  DevicePush(const proto::TableSpec& spec,
             const protocol::TableRuntimeConfig& config,
             const ShardRouter& router, ServerGroup& servers,
             const WorkerClock& clock);
  DevicePush(const DevicePush&) = delete;
  DevicePush& operator=(const DevicePush&) = delete;

  // Sends `grad` (device memory: every row of the table for kAllShards,
  // else the rows of `shard`, row-major, dim floats a row). Returns once
  // the packets are posted to the inboxes (ServerGroup::FlushInboxes waits
  // for them). `sent_rows` (may be null) gets the global rows sent,
  // increasing. kInvalidArgument: null or wrongly sized grad, no such
  // shard, memory that is not on the current device; kNotSupported: no
  // CUDA in this build or no usable device; kInternal: a CUDA error.
  Status Post(std::span<const float> grad, uint32_t shard,
              std::vector<uint64_t>* sent_rows);

 private:
  // Per build: the device packer and host buffers (device_push_cuda.cc) or
  // nothing (device_push_none.cc).
  struct Device;
  struct DeviceDeleter {  // defined with Device, so this header needs neither
    void operator()(Device* d) const;
  };

  // The checks every build makes: grad's pointer and size, the shard.
  Status CheckRequest(std::span<const float> grad, uint32_t shard) const;
  // Per build: packs shards [first, last) of grad, whose first row is
  // global row router_.FirstRow(first), and writes them. mu_ held.
  Status PackAndSend(std::span<const float> grad, uint32_t first, uint32_t last,
                     std::vector<uint64_t>* sent_rows);

  const proto::TableSpec& spec_;
  const protocol::TableRuntimeConfig config_;
  const ShardRouter& router_;
  ServerGroup& servers_;
  const WorkerClock& clock_;

  std::mutex mu_;  // one device push of this table at a time
  // Created by the first push; guarded by mu_.
  std::unique_ptr<Device, DeviceDeleter> device_;
};

}  // namespace ps::worker
