// DevicePush where ps_kernels_cuda exists (device_push.h): the gradient's
// pointer is checked with the CUDA runtime, every shard is packed on the
// device first and only then are the packets written, so a CUDA error
// sends nothing (an inbox error can still leave earlier shards sent, as on
// the host path).
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <string>

#include "client/device_push.h"
#include "kernels/cuda/gpu_kernels.h"
#include "protocol/cuda/device_packer.h"

namespace ps::worker {
namespace {

namespace gpu = protocol::gpu;

// InvalidArgument unless `p` is device (or managed) memory of the calling
// thread's current device, the one the packer's kernels run on; that
// device's ordinal in *device.
Status CheckOnCurrentDevice(const float* p, int* device) {
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, p);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it for the next call
    return InvalidArgument(std::string("cudaPointerGetAttributes: ") +
                           cudaGetErrorString(err));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    return InvalidArgument("the gradient is not in device memory (it is " +
                           std::string(attr.type == cudaMemoryTypeHost
                                           ? "pinned host memory"
                                           : "host memory") +
                           ")");
  }
  int& current = *device;
  err = cudaGetDevice(&current);
  if (err != cudaSuccess) {
    return Internal(std::string("cudaGetDevice: ") + cudaGetErrorString(err));
  }
  if (attr.device != current) {
    return InvalidArgument("the gradient is on device " +
                           std::to_string(attr.device) +
                           ", this thread's current device is " +
                           std::to_string(current) + " (cudaSetDevice first)");
  }
  return Status::OK();
}

}  // namespace

// One shard's packets as the packer left them in host memory.
struct ShardPackets {
  std::vector<uint8_t> bytes;
  gpu::DevicePackResult result;
};

struct DevicePush::Device {
  explicit Device(int ordinal) : device(ordinal) {}
  // Where the packer's scratch lives: a push from another device (the
  // caller switched) starts a new packer there.
  const int device;
  gpu::DevicePacker packer;  // device scratch, kept between pushes
  std::vector<ShardPackets> shards;
};

void DevicePush::DeviceDeleter::operator()(Device* d) const { delete d; }

Status DevicePushAvailable() {
  return kernels::gpu::DeviceAvailable().WithContext("push from device memory");
}

Status DevicePush::PackAndSend(std::span<const float> grad, uint32_t first,
                               uint32_t last,
                               std::vector<uint64_t>* sent_rows) {
  const std::string what = "push from device to table " + spec_.name();
  PS_RETURN_IF_ERROR(kernels::gpu::DeviceAvailable().WithContext(what));
  int device = 0;
  PS_RETURN_IF_ERROR(
      CheckOnCurrentDevice(grad.data(), &device).WithContext(what));
  if (device_ == nullptr || device_->device != device) {
    device_.reset();  // its scratch is freed before the new one is made
    device_.reset(new Device(device));
  }
  Device& d = *device_;
  if (d.shards.size() < router_.shards()) d.shards.resize(router_.shards());

  gpu::DevicePackOptions o;
  o.meta.table_id = spec_.id();
  o.meta.sender_id = clock_.worker_id();
  o.meta.step = clock_.current();  // one step for every shard of the push
  o.meta.row_dim = spec_.dim();
  o.meta.value_type = config_.push_value_type;
  o.meta.index_encoding = protocol::IndexEncoding::kDeltaVarint;
  switch (config_.sparsify) {
    case proto::SPARSIFY_THRESHOLD:
      o.selection = gpu::RowSelection::kThreshold;
      o.epsilon = config_.sparsify_epsilon;
      o.norm = kernels::RowNorm::kL2;  // the host error feedback's default
      break;
    case proto::SPARSIFY_TOPK:
      o.selection = gpu::RowSelection::kTopK;
      o.norm = kernels::RowNorm::kL2;
      break;
    default:
      // Nonzero rows: max |v| >= the smallest positive float.
      o.selection = gpu::RowSelection::kThreshold;
      o.epsilon = std::numeric_limits<float>::denorm_min();
      o.norm = kernels::RowNorm::kMaxAbs;
      break;
  }

  const uint64_t base = router_.FirstRow(first);
  const uint32_t dim = spec_.dim();
  for (uint32_t s = first; s < last; ++s) {
    const uint64_t rows = router_.RowsOf(s);
    o.meta.shard_id = s;
    o.max_packet_bytes = servers_[s].inbox().max_packet_bytes();
    if (o.selection == gpu::RowSelection::kTopK) {
      o.k = static_cast<size_t>(
          std::ceil(static_cast<double>(config_.topk_fraction) *
                    static_cast<double>(rows)));
    }
    const float* g = grad.data() + (router_.FirstRow(s) - base) * dim;
    ShardPackets& p = d.shards[s];
    PS_RETURN_IF_ERROR(d.packer.Pack(g, rows, o, &p.bytes, &p.result)
                           .WithContext(what + ", shard " + std::to_string(s)));
  }
  for (uint32_t s = first; s < last; ++s) {
    ShardPackets& p = d.shards[s];
    if (!p.result.packets.empty()) {
      PS_RETURN_IF_ERROR(
          servers_[s].inbox().WritePackets(p.bytes, p.result.packets));
    }
    if (sent_rows == nullptr) continue;
    for (uint32_t r : p.result.rows) {
      sent_rows->push_back(router_.FirstRow(s) + r);
    }
  }
  return Status::OK();
}

}  // namespace ps::worker
