// DeviceParamTable with CUDA (table/device_param_table.h): device memory,
// lanes of stream + staging buffers, and the apply kernels of
// kernels/cuda/device_optimizers.h. Host C++ calling the CUDA runtime API;
// compiled only when the build has CUDA (table/CMakeLists.txt), otherwise
// device_param_table_stub.cc stands in.
#include "table/device_param_table.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cuda/device_optimizers.h"
#include "kernels/cuda/gpu_kernels.h"
#include "protocol/cuda/device_decoder.h"
#include "protocol/table_config.h"
#include "table/initializer.h"
#include "table/param_table.h"

namespace ps::table {
namespace {

Status CudaError(const std::string& what, cudaError_t err) {
  return Internal(what + ": " + cudaGetErrorString(err));
}

#define PS_CUDA_RETURN(what, call)          \
  do {                                      \
    const cudaError_t ps_cuda_err = (call); \
    if (ps_cuda_err != cudaSuccess) {       \
      return CudaError(what, ps_cuda_err);  \
    }                                       \
  } while (0)

// Host chunk for initializing and filling device arrays: big enough that
// the copies run near PCIe speed, small enough not to matter in host memory.
constexpr uint64_t kChunkFloats = uint64_t{4} << 20;

// Staging sections start on 256-byte boundaries (cudaMalloc's alignment).
constexpr size_t kAlign = 256;
size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

Status AllocateDevice(float** out, uint64_t floats, const char* what) {
  *out = nullptr;
  if (floats == 0) return Status::OK();
  void* memory = nullptr;
  const cudaError_t err = cudaMalloc(&memory, floats * sizeof(float));
  if (err == cudaSuccess) *out = static_cast<float*>(memory);
  if (err != cudaSuccess) {
    return ResourceExhausted(
        std::string("cannot allocate ") + what + ": " +
        std::to_string(floats * sizeof(float)) +
        " bytes of device memory: " + cudaGetErrorString(err));
  }
  return Status::OK();
}

// Fills `floats` device floats with `value` from a host chunk (no kernel
// needed; this runs once per table).
Status FillDevice(float* device, uint64_t floats, float value) {
  if (value == 0.0f) {
    PS_CUDA_RETURN("cudaMemset", cudaMemset(device, 0, floats * sizeof(float)));
    return Status::OK();
  }
  std::vector<float> chunk(std::min(floats, kChunkFloats), value);
  for (uint64_t at = 0; at < floats; at += chunk.size()) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), floats - at);
    PS_CUDA_RETURN("cudaMemcpy H2D (fill)",
                   cudaMemcpy(device + at, chunk.data(), n * sizeof(float),
                              cudaMemcpyHostToDevice));
  }
  return Status::OK();
}

// What the apply kernels get of a table: its device arrays and shape.
kernels::gpu::DeviceTable KernelView(float* params, float* const state[2],
                                     uint64_t num_rows, uint32_t dim) {
  kernels::gpu::DeviceTable table;
  table.params = params;
  table.state[0] = state[0];
  table.state[1] = state[1];
  table.num_rows = num_rows;
  table.dim = dim;
  return table;
}

// Where ApplyPacket's guard word comes back in a lane's pinned buffer: after
// the copy of a packet of `packet_bytes`.
size_t GuardOffset(size_t packet_bytes) { return Aligned(packet_bytes); }

bool IsPageLocked(const void* p) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: plain memory is no error here
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace

// One concurrent Apply's resources. Buffers grow to the largest packet seen
// and are kept, so steady-state applies allocate nothing.
struct DeviceParamTable::Lane {
  cudaStream_t stream = nullptr;
  char* pinned = nullptr;  // page-locked host staging
  size_t pinned_bytes = 0;
  char* device = nullptr;  // device copies of rows, grads, order, starts
  size_t device_bytes = 0;
  size_t staging_bytes = 0;             // this apply's need (Reserve)
  std::vector<uint32_t> order, starts;  // GroupRows' output

  ~Lane() {
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (pinned != nullptr) cudaFreeHost(pinned);
    if (device != nullptr) cudaFree(device);
  }

  // Room for `bytes` of device staging now, and for as many pinned bytes
  // when an upload first needs them (a caller whose packets are page-locked
  // already never gets a pinned buffer). A buffer that grows at least
  // doubles, so a slowly growing packet size reallocates rarely.
  Status Reserve(size_t bytes) {
    staging_bytes = bytes;
    if (bytes > device_bytes) {
      const size_t want = std::max(bytes, 2 * device_bytes);
      if (device != nullptr) cudaFree(device);
      device = nullptr;
      device_bytes = 0;
      void* memory = nullptr;
      PS_CUDA_RETURN("cudaMalloc of " + std::to_string(want) + " bytes",
                     cudaMalloc(&memory, want));
      device = static_cast<char*>(memory);
      device_bytes = want;
    }
    return Status::OK();
  }

  Status ReservePinned() { return ReservePinned(staging_bytes); }

  // At least `bytes` of pinned staging (ApplyPacket's packet copy).
  Status ReservePinned(size_t bytes) {
    if (bytes <= pinned_bytes) return Status::OK();
    const size_t want = std::max(bytes, 2 * pinned_bytes);
    // The buffer may still feed copies enqueued earlier in this apply.
    PS_CUDA_RETURN("cudaStreamSynchronize", cudaStreamSynchronize(stream));
    if (pinned != nullptr) cudaFreeHost(pinned);
    pinned = nullptr;
    pinned_bytes = 0;
    void* memory = nullptr;
    PS_CUDA_RETURN("cudaMallocHost of " + std::to_string(want) + " bytes",
                   cudaMallocHost(&memory, want));
    pinned = static_cast<char*>(memory);
    pinned_bytes = want;
    return Status::OK();
  }

  // Enqueues the copy of `bytes` at `host` to device + offset, through the
  // staging buffer unless `host` is page-locked already.
  Status Upload(const void* host, size_t bytes, size_t offset) {
    if (bytes == 0) return Status::OK();
    const void* source = host;
    if (!IsPageLocked(host)) {
      PS_RETURN_IF_ERROR(ReservePinned());
      std::memcpy(pinned + offset, host, bytes);
      source = pinned + offset;
    }
    PS_CUDA_RETURN("cudaMemcpyAsync H2D",
                   cudaMemcpyAsync(device + offset, source, bytes,
                                   cudaMemcpyHostToDevice, stream));
    return Status::OK();
  }
};

Status DeviceParamTable::Available() { return kernels::gpu::DeviceAvailable(); }

Status DeviceParamTable::CheckDevice(int device) {
  PS_RETURN_IF_ERROR(Available());
  int devices = 0;
  PS_CUDA_RETURN("cudaGetDeviceCount", cudaGetDeviceCount(&devices));
  if (device < 0 || device >= devices) {
    return InvalidArgument("CUDA device " + std::to_string(device) +
                           " does not exist (this machine has " +
                           std::to_string(devices) + ")");
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<DeviceParamTable>> DeviceParamTable::Create(
    const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
    int device) {
  PS_RETURN_IF_ERROR(CheckDevice(device));
  return Make(spec, first_row, num_rows, device, nullptr);
}

StatusOr<std::unique_ptr<DeviceParamTable>> DeviceParamTable::CreateWithRows(
    const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
    int device, std::span<float> rows) {
  PS_RETURN_IF_ERROR(CheckRowsSize(spec, num_rows, rows));
  PS_RETURN_IF_ERROR(CheckDevice(device));
  if (rows.empty()) return Make(spec, first_row, num_rows, device, nullptr);
  // The whole span must be memory of `device`: the kernels write it on that
  // device, and a host pointer here would be written by the GPU.
  cudaPointerAttributes first, last;
  const cudaError_t a = cudaPointerGetAttributes(&first, rows.data());
  const cudaError_t b = cudaPointerGetAttributes(&last, &rows.back());
  if (a != cudaSuccess || b != cudaSuccess) (void)cudaGetLastError();
  if (a != cudaSuccess || b != cudaSuccess ||
      first.type != cudaMemoryTypeDevice || first.device != device ||
      last.type != cudaMemoryTypeDevice || last.device != device) {
    return InvalidArgument("the rows' memory is not device memory of cuda:" +
                           std::to_string(device) +
                           " (from its first float to its last)");
  }
  return Make(spec, first_row, num_rows, device, rows.data());
}

StatusOr<std::unique_ptr<DeviceParamTable>> DeviceParamTable::Make(
    const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
    int device, float* rows) {
  PS_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device));

  std::unique_ptr<DeviceParamTable> t(new DeviceParamTable(spec));
  t->first_row_ = first_row;
  t->num_rows_ = num_rows;
  t->device_ = device;
  const uint64_t floats = num_rows * spec.dim();
  if (rows != nullptr) {
    t->data_ = rows;
  } else {
    PS_RETURN_IF_ERROR(AllocateDevice(&t->data_, floats, "rows"));
    t->owns_data_ = true;
  }

  // The rows, a chunk of whole rows at a time, exactly as ParamTable
  // starts them (InitializeRows expects zeroed memory; every row is
  // written, so the caller's memory may hold anything before).
  if (floats > 0) {
    const uint64_t chunk_rows =
        std::max<uint64_t>(1, kChunkFloats / std::max<uint32_t>(1, t->dim_));
    std::vector<float> host;
    for (uint64_t r = 0; r < num_rows; r += chunk_rows) {
      const uint64_t n = std::min(chunk_rows, num_rows - r);
      host.assign(n * t->dim_, 0.0f);
      InitializeRows(spec.initializer(), first_row + r, n, t->dim_,
                     host.data());
      PS_CUDA_RETURN(
          "cudaMemcpy H2D (initial rows)",
          cudaMemcpy(t->data_ + r * t->dim_, host.data(),
                     host.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
  }

  for (int k = 0; k < t->optimizer_.arrays(); ++k) {
    PS_RETURN_IF_ERROR(
        AllocateDevice(&t->state_[k], floats, "optimizer state"));
    if (floats > 0) {
      PS_RETURN_IF_ERROR(
          FillDevice(t->state_[k], floats, t->optimizer_.initial_value(k)));
    }
  }
  // cudaMemset and copies from pageable memory may still be running on the
  // legacy stream, which the lanes' non-blocking streams do not wait for.
  PS_CUDA_RETURN("cudaDeviceSynchronize", cudaDeviceSynchronize());
  return t;
}

DeviceParamTable::DeviceParamTable(const proto::TableSpec& spec)
    : Table(spec), dim_(spec.dim()), optimizer_(spec) {}

DeviceParamTable::~DeviceParamTable() {
  // Frees on the table's device; errors cannot be reported from here and
  // the memory is gone with the process anyway.
  cudaSetDevice(device_);
  lanes_.clear();
  if (owns_data_ && data_ != nullptr) cudaFree(data_);
  for (float* s : state_) {
    if (s != nullptr) cudaFree(s);
  }
}

uint64_t DeviceParamTable::bytes() const {
  return num_rows_ * dim_ * sizeof(float) * (1 + optimizer_.arrays());
}

StatusOr<DeviceParamTable::Lane*> DeviceParamTable::TakeLane() {
  std::lock_guard<std::mutex> lock(lanes_mu_);
  if (!free_lanes_.empty()) {
    Lane* lane = free_lanes_.back();
    free_lanes_.pop_back();
    return lane;
  }
  auto lane = std::make_unique<Lane>();
  // Non-blocking: the lanes' streams do not wait for the legacy default
  // stream (or each other), so concurrent applies really overlap.
  PS_CUDA_RETURN(
      "cudaStreamCreateWithFlags",
      cudaStreamCreateWithFlags(&lane->stream, cudaStreamNonBlocking));
  lanes_.push_back(std::move(lane));
  return lanes_.back().get();
}

void DeviceParamTable::ReturnLane(Lane* lane) {
  std::lock_guard<std::mutex> lock(lanes_mu_);
  free_lanes_.push_back(lane);
}

Status DeviceParamTable::Apply(std::span<const uint32_t> rows,
                               std::span<const float> grads) {
  if (grads.size() != rows.size() * dim_) {
    return InvalidArgument(
        std::to_string(rows.size()) + " rows of dim " + std::to_string(dim_) +
        " need " + std::to_string(rows.size() * dim_) +
        " gradient values, got " + std::to_string(grads.size()));
  }
  if (rows.size() >= (uint64_t{1} << 32)) {
    return InvalidArgument("a packet of " + std::to_string(rows.size()) +
                           " rows: at most 2^32 - 1 in one apply");
  }
  if (rows.empty() && !optimizer_.optimizer()) return Status::OK();
  PS_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device_));
  PS_ASSIGN_OR_RETURN(Lane * lane, TakeLane());
  Status status;
  if (optimizer_.optimizer()) {
    std::lock_guard<std::mutex> lock(optimizer_mu_);
    status = ApplyOnLane(*lane, rows, grads);
    if (status.ok()) optimizer_.NextStep();
  } else {
    status = ApplyOnLane(*lane, rows, grads);
  }
  // An apply that failed part-way may have copies in flight from the
  // lane's staging buffer; the next user must not overwrite it under them.
  if (!status.ok()) (void)cudaStreamSynchronize(lane->stream);
  ReturnLane(lane);
  return status;
}

Status DeviceParamTable::ApplyOnLane(Lane& lane, std::span<const uint32_t> rows,
                                     std::span<const float> grads) {
  if (rows.empty()) return Status::OK();
  const bool grouped = optimizer_.optimizer() &&
                       kernels::gpu::GroupRows(rows, &lane.order, &lane.starts);
  const size_t rows_at = 0;
  const size_t grads_at = Aligned(rows.size_bytes());
  const size_t order_at = grads_at + Aligned(grads.size_bytes());
  const size_t starts_at =
      order_at + Aligned(lane.order.size() * sizeof(uint32_t));
  const size_t total = starts_at + lane.starts.size() * sizeof(uint32_t);
  PS_RETURN_IF_ERROR(lane.Reserve(total));
  PS_RETURN_IF_ERROR(lane.Upload(rows.data(), rows.size_bytes(), rows_at));
  PS_RETURN_IF_ERROR(lane.Upload(grads.data(), grads.size_bytes(), grads_at));
  if (grouped) {
    PS_RETURN_IF_ERROR(lane.Upload(
        lane.order.data(), lane.order.size() * sizeof(uint32_t), order_at));
    PS_RETURN_IF_ERROR(lane.Upload(
        lane.starts.data(), lane.starts.size() * sizeof(uint32_t), starts_at));
  }
  // The rows are checked while their copies are in flight: the check reads
  // every index on the host, which at 4M rows takes about as long as the
  // copy of a dim-16 packet. A bad row stops the apply here, before any
  // kernel touches the table (Apply waits for the copies then).
  PS_RETURN_IF_ERROR(kernels::gpu::CheckRows(rows, num_rows_));

  const kernels::gpu::DeviceTable table =
      KernelView(data_, state_, num_rows_, dim_);
  const auto* d_rows = reinterpret_cast<const uint32_t*>(lane.device + rows_at);
  const auto* d_grads = reinterpret_cast<const float*>(lane.device + grads_at);
  Status launched;
  if (!optimizer_.optimizer()) {
    launched = kernels::gpu::LaunchAddRows(table, d_rows, d_grads, rows.size(),
                                           optimizer_.add_scale(), lane.stream);
  } else {
    const auto* d_order =
        grouped ? reinterpret_cast<const uint32_t*>(lane.device + order_at)
                : nullptr;
    const auto* d_starts =
        grouped ? reinterpret_cast<const uint32_t*>(lane.device + starts_at)
                : nullptr;
    const size_t groups = grouped ? lane.starts.size() - 1 : rows.size();
    launched = kernels::gpu::LaunchOptimizerRows(
        *optimizer_.optimizer(), optimizer_.steps() + 1, table, d_rows, d_grads,
        rows.size(), d_order, d_starts, groups, lane.stream);
  }
  // Wait even after a failed launch: earlier copies on the stream read the
  // staging buffers, which the next user of the lane overwrites.
  const cudaError_t synced = cudaStreamSynchronize(lane.stream);
  PS_RETURN_IF_ERROR(launched);
  if (synced != cudaSuccess) return CudaError("device apply", synced);
  return Status::OK();
}

Status DeviceParamTable::ApplyPacket(
    std::span<const uint8_t> packet,
    const protocol::SparsePacketExpectations& expect,
    protocol::SparsePacketHeader* header_out) {
  PS_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device_));
  PS_ASSIGN_OR_RETURN(Lane * lane, TakeLane());
  protocol::SparsePacketHeader header;
  Status status = StagePacket(*lane, packet, expect, &header);
  if (status.ok()) {
    if (optimizer_.optimizer()) {
      std::lock_guard<std::mutex> lock(optimizer_mu_);
      status = ApplyPacketOnLane(*lane, header);
      if (status.ok()) optimizer_.NextStep();
    } else {
      status = ApplyPacketOnLane(*lane, header);
    }
  }
  // As in Apply: nothing may still read the lane's buffers when it goes
  // back.
  if (!status.ok()) (void)cudaStreamSynchronize(lane->stream);
  ReturnLane(lane);
  if (status.ok() && header_out != nullptr) *header_out = header;
  return status;
}

Status DeviceParamTable::StagePacket(
    Lane& lane, std::span<const uint8_t> packet,
    const protocol::SparsePacketExpectations& expect,
    protocol::SparsePacketHeader* header) {
  // The copy first: the header, the checksum and the upload all read bytes
  // the sender can no longer change, so what was checked is what the
  // device decodes. The guard word comes back after the packet.
  PS_RETURN_IF_ERROR(
      lane.ReservePinned(GuardOffset(packet.size()) + sizeof(uint64_t)));
  if (!packet.empty()) std::memcpy(lane.pinned, packet.data(), packet.size());
  const std::span<const uint8_t> copy(
      reinterpret_cast<const uint8_t*>(lane.pinned), packet.size());
  protocol::SparsePacketExpectations mine = expect;
  mine.row_dim = dim_;
  mine.table_rows = num_rows_;
  PS_ASSIGN_OR_RETURN(*header, protocol::gpu::CheckPacketOnHost(copy, mine));
  return Status::OK();
}

Status DeviceParamTable::ApplyPacketOnLane(
    Lane& lane, const protocol::SparsePacketHeader& header) {
  size_t scratch_bytes = 0;
  PS_RETURN_IF_ERROR(protocol::gpu::DecodeScratchBytes(header, &scratch_bytes));
  const size_t scratch_at = Aligned(header.payload_bytes);
  PS_RETURN_IF_ERROR(lane.Reserve(scratch_at + scratch_bytes));
  PS_CUDA_RETURN(
      "cudaMemcpyAsync H2D (packet)",
      cudaMemcpyAsync(
          lane.device, lane.pinned + protocol::kSparsePacketHeaderBytes,
          header.payload_bytes, cudaMemcpyHostToDevice, lane.stream));
  protocol::gpu::DecodedPacket decoded;
  PS_RETURN_IF_ERROR(protocol::gpu::LaunchDecodePacket(
      header, reinterpret_cast<const uint8_t*>(lane.device), num_rows_,
      lane.device + scratch_at, scratch_bytes, &decoded, lane.stream));

  const kernels::gpu::DeviceTable table =
      KernelView(data_, state_, num_rows_, dim_);
  const size_t n = header.row_count;
  Status launched;
  if (!optimizer_.optimizer()) {
    launched = kernels::gpu::LaunchAddRows(table, decoded.rows, decoded.values,
                                           n, optimizer_.add_scale(),
                                           lane.stream, decoded.error);
  } else {
    // A valid packet's rows are strictly increasing, so distinct: every
    // entry is its own group and nothing needs grouping (an invalid one is
    // held back by the guard).
    launched = kernels::gpu::LaunchOptimizerRows(
        *optimizer_.optimizer(), optimizer_.steps() + 1, table, decoded.rows,
        decoded.values, n, nullptr, nullptr, n, lane.stream, decoded.error);
  }
  // The guard word back next to the packet copy (page-locked, so the copy
  // is asynchronous and one synchronize covers everything).
  char* guard_host =
      lane.pinned +
      GuardOffset(protocol::kSparsePacketHeaderBytes + header.payload_bytes);
  const cudaError_t copied =
      launched.ok()
          ? cudaMemcpyAsync(guard_host, decoded.error, sizeof(uint64_t),
                            cudaMemcpyDeviceToHost, lane.stream)
          : cudaSuccess;
  // Wait even after a failed launch: the upload reads the pinned copy.
  const cudaError_t synced = cudaStreamSynchronize(lane.stream);
  PS_RETURN_IF_ERROR(launched);
  if (copied != cudaSuccess) return CudaError("cudaMemcpyAsync D2H", copied);
  if (synced != cudaSuccess) return CudaError("device packet apply", synced);
  uint64_t guard = 0;
  std::memcpy(&guard, guard_host, sizeof guard);
  return protocol::gpu::DecodeStatus(guard, header, num_rows_);
}

Status DeviceParamTable::CopyTo(std::vector<float>* values,
                                std::vector<float>* state,
                                uint64_t* optimizer_steps) const {
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  PS_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device_));
  const uint64_t floats = num_rows_ * dim_;
  values->resize(floats);
  if (floats > 0) {
    PS_CUDA_RETURN("cudaMemcpy D2H (rows)",
                   cudaMemcpy(values->data(), data_, floats * sizeof(float),
                              cudaMemcpyDeviceToHost));
  }
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    state[k].resize(floats);
    if (floats > 0) {
      PS_CUDA_RETURN(
          "cudaMemcpy D2H (state)",
          cudaMemcpy(state[k].data(), state_[k], floats * sizeof(float),
                     cudaMemcpyDeviceToHost));
    }
  }
  *optimizer_steps = optimizer_.steps();
  return Status::OK();
}

Status DeviceParamTable::RestoreFrom(std::span<const float> values,
                                     const std::vector<float>* state,
                                     uint64_t optimizer_steps) {
  const uint64_t floats = num_rows_ * dim_;
  if (values.size() != floats) {
    return InvalidArgument("restore: " + std::to_string(values.size()) +
                           " values for a table of " + std::to_string(floats));
  }
  for (int k = 0; k < optimizer_.arrays(); ++k) {
    if (state[k].size() != floats) {
      return InvalidArgument("restore: state array " + std::to_string(k) +
                             " holds " + std::to_string(state[k].size()) +
                             " floats, want " + std::to_string(floats));
    }
  }
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  PS_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device_));
  if (floats > 0) {
    PS_CUDA_RETURN("cudaMemcpy H2D (rows)",
                   cudaMemcpy(data_, values.data(), floats * sizeof(float),
                              cudaMemcpyHostToDevice));
    for (int k = 0; k < optimizer_.arrays(); ++k) {
      PS_CUDA_RETURN(
          "cudaMemcpy H2D (state)",
          cudaMemcpy(state_[k], state[k].data(), floats * sizeof(float),
                     cudaMemcpyHostToDevice));
    }
  }
  // See Create: the copies must land before the next Apply's stream runs.
  PS_CUDA_RETURN("cudaDeviceSynchronize", cudaDeviceSynchronize());
  optimizer_.set_steps(optimizer_steps);
  return Status::OK();
}

uint64_t DeviceParamTable::optimizer_steps() const {
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  return optimizer_.steps();
}

}  // namespace ps::table
